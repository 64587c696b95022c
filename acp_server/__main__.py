"""`python -m acp_server` is the `acp-server` command."""

import sys

from acp_server.cli import main

sys.exit(main())
