"""Runner mode: a per-user background process that owns agents, sessions and the journal, and
thin fronts that relay an editor's stdio to it over a Unix domain socket (see docs/runner.md)."""
