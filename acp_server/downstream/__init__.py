"""ACP agents below acp-server (`--agent acp -- COMMAND`, and the presets `claude`, `codex`,
`gemini`, `fast-agent`, `hermes-acp`): acp-server is their ACP client on its own `rpc` peer,
and each is a `RuntimeAdapter` like the built-in agents. Nothing here is imported until one of
them is asked for (the registry names `presets` by an import string)."""
