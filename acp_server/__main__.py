"""`python -m acp_server` is the `acp-server` command."""

import sys

from acp_server.cli.main import main

sys.exit(main())
