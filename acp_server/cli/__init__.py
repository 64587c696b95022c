"""The command line: the entry point, the shared option table, the `prompt` client, terminal
display, journal inspection and `doctor`. Nothing below imports from here."""
