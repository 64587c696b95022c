"""SQLite sessions and run journals; knows nothing of ACP."""
