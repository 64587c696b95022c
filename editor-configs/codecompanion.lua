-- acp-server as an ACP adapter of CodeCompanion.nvim (Neovim).
-- Put this in your CodeCompanion setup (with lazy.nvim: in `opts`), replace
-- /path/to/acp-server/.venv/bin/acp-server with the absolute path of your installed command,
-- then open a chat with :CodeCompanionChat (acp_server is made the default below), or pick a
-- command: :CodeCompanionChat adapter=acp_server command=openai
require("codecompanion").setup({
  adapters = {
    acp = {
      acp_server = function()
        local helpers = require("codecompanion.adapters.acp.helpers")
        return {
          name = "acp_server",
          formatted_name = "acp-server",
          type = "acp",
          roles = { llm = "assistant", user = "user" },
          -- The first entries of the JSON files, in their order: `default` is the demo (the
          -- scripted tour: send a prompt containing "demo") and `echo`, which need nothing
          -- installed; `openai` runs the openai agent against a local Ollama.
          commands = {
            default = {
              "/path/to/acp-server/.venv/bin/acp-server",
              "--agent",
              "scripted",
              "--script",
              "/path/to/acp-server/examples/demo-script.json",
            },
            echo = { "/path/to/acp-server/.venv/bin/acp-server", "--agent", "echo" },
            openai = {
              "/path/to/acp-server/.venv/bin/acp-server",
              "--agent",
              "openai",
              "--model",
              "qwen2.5-coder:7b",
            },
          },
          -- Added to Neovim's environment for the server process, whichever command runs, so
          -- the model is a flag of `default` (the echo and scripted agents refuse a model).
          -- Server options can also be given here as ACP_SERVER_<OPTION>.
          env = {
            OPENAI_BASE_URL = "http://localhost:11434/v1",
          },
          defaults = {
            mcpServers = {},
            timeout = 20000, -- ms to wait for the server's answers to initialize and session/new
          },
          parameters = {
            protocolVersion = 1,
            clientCapabilities = { fs = { readTextFile = true, writeTextFile = true } },
            clientInfo = { name = "CodeCompanion.nvim", version = "1.0.0" },
          },
          handlers = {
            setup = function(self)
              return true
            end,
            -- acp-server asks for no authentication (its authMethods list is empty).
            auth = function(self)
              return true
            end,
            form_messages = function(self, messages, capabilities)
              return helpers.form_messages(self, messages, capabilities)
            end,
            on_exit = function(self, code) end,
          },
        }
      end,
    },
  },
  interactions = {
    chat = { adapter = "acp_server" },
  },
})
