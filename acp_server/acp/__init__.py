"""The ACP layer: one handler per method, sessions, modes and config options, slash commands,
and serving them over stdio; knows nothing of SQLite."""
