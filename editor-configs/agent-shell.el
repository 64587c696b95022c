;;; acp-server for agent-shell (Emacs).  -*- lexical-binding: t; -*-
;;
;; Put this in your init file after agent-shell is installed, replace
;; /path/to/acp-server/.venv/bin/acp-server with the absolute path of your installed
;; command, then M-x agent-shell and pick "acp-server".  Any server option can also be
;; given in :environment-variables as "ACP_SERVER_<OPTION>=value"; the model is a flag of
;; the openai command because the echo and scripted agents refuse a model setting.

(defun my/acp-server-agent-config ()
  "An agent-shell configuration that starts acp-server's demo (it needs nothing installed)."
  (agent-shell-make-agent-config
   :identifier 'acp-server
   :mode-line-name "acp-server"
   :buffer-name "acp-server"
   :shell-prompt "acp-server> "
   :shell-prompt-regexp "acp-server> "
   :client-maker
   (lambda (buffer)
     (acp-make-client
      :command "/path/to/acp-server/.venv/bin/acp-server"
      :command-params '("--agent" "scripted" "--script" "/path/to/acp-server/examples/demo-script.json")
      ;; The demo above (send a prompt containing "demo") and '("--agent" "echo") need no model;
      ;; '("--agent" "openai" "--model" "qwen2.5-coder:7b") runs the openai agent on Ollama.
      :environment-variables '("OPENAI_BASE_URL=http://localhost:11434/v1")
      :context-buffer buffer))))

(with-eval-after-load 'agent-shell
  (add-to-list 'agent-shell-agent-configs (my/acp-server-agent-config) t))
