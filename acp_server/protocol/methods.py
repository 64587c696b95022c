"""ACP method names, typed once, as the schema's meta.json tables name them.

`AGENT_METHODS` are the ones a client calls on us (`UNSTABLE_AGENT_METHODS` too, with
`--unstable`), `CLIENT_METHODS` the ones we call on the client; tests/test_methods.py checks
them against the vendored `schema/meta.json` (and `meta.unstable.json`).
"""

# --- agent methods: the client calls them on us ----------------------------------------------
INITIALIZE = "initialize"
AUTHENTICATE = "authenticate"
LOGOUT = "logout"
SESSION_NEW = "session/new"
SESSION_LOAD = "session/load"
SESSION_RESUME = "session/resume"
SESSION_LIST = "session/list"
SESSION_CLOSE = "session/close"
SESSION_DELETE = "session/delete"
SESSION_PROMPT = "session/prompt"
SESSION_CANCEL = "session/cancel"
SESSION_SET_MODE = "session/set_mode"
SESSION_SET_CONFIG_OPTION = "session/set_config_option"
AUTH_LOGIN = "auth/login"  # v2's authenticate
AUTH_LOGOUT = "auth/logout"  # v2's logout
SESSION_FORK = "session/fork"  # unstable (schema.unstable.json): only with --unstable

# --- client methods: we call them on the client ----------------------------------------------
SESSION_UPDATE = "session/update"
REQUEST_PERMISSION = "session/request_permission"
FS_READ_TEXT_FILE = "fs/read_text_file"
FS_WRITE_TEXT_FILE = "fs/write_text_file"
TERMINAL_CREATE = "terminal/create"
TERMINAL_OUTPUT = "terminal/output"
TERMINAL_WAIT_FOR_EXIT = "terminal/wait_for_exit"
TERMINAL_KILL = "terminal/kill"
TERMINAL_RELEASE = "terminal/release"
ELICITATION_CREATE = "elicitation/create"
ELICITATION_COMPLETE = "elicitation/complete"

AGENT_METHODS = frozenset(
    {
        INITIALIZE,
        AUTHENTICATE,
        LOGOUT,
        SESSION_NEW,
        SESSION_LOAD,
        SESSION_RESUME,
        SESSION_LIST,
        SESSION_CLOSE,
        SESSION_DELETE,
        SESSION_PROMPT,
        SESSION_CANCEL,
        SESSION_SET_MODE,
        SESSION_SET_CONFIG_OPTION,
    }
)
# Agent methods only schema.unstable.json has: served only with --unstable.
UNSTABLE_AGENT_METHODS = frozenset({SESSION_FORK})
CLIENT_METHODS = frozenset(
    {
        SESSION_UPDATE,
        REQUEST_PERMISSION,
        FS_READ_TEXT_FILE,
        FS_WRITE_TEXT_FILE,
        TERMINAL_CREATE,
        TERMINAL_OUTPUT,
        TERMINAL_WAIT_FOR_EXIT,
        TERMINAL_KILL,
        TERMINAL_RELEASE,
        ELICITATION_CREATE,
        ELICITATION_COMPLETE,
    }
)

TERMINAL_CANCEL = "terminal/cancel"  # v2: stop an agent-owned terminal's process
TOOL_CALL_CANCEL = "tool_call/cancel"  # v2: stop one tool call

# ACP v2 (schema/v2): the agent methods a v2 client calls on us (v1's client fs/terminal are gone)
V2_AGENT_METHODS = frozenset(
    {
        INITIALIZE,
        AUTH_LOGIN,
        AUTH_LOGOUT,
        SESSION_NEW,
        SESSION_RESUME,
        SESSION_LIST,
        SESSION_CLOSE,
        SESSION_DELETE,
        SESSION_PROMPT,
        SESSION_CANCEL,
        SESSION_SET_CONFIG_OPTION,
        TERMINAL_CANCEL,
        TOOL_CALL_CANCEL,
    }
)
