"""acp-server: an ACP v1 agent server that runs synchronous Python agents in a thread pool."""

__version__ = "0.1.0"
