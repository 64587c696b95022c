"""Turns: supervision, the thread bridge, the editor-side services (permission, questions, files,
terminal) with their local fallbacks, the permission policy, the one runtime event ->
`session/update` mapper, and replay. Imports nothing from `acp_server.acp` or `acp_server.cli`."""
