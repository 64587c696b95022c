"""Agent runtimes behind one interface; imports nothing from `acp_server`."""
