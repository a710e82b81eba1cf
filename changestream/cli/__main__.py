"""``python -m changestream.cli``: the command line."""

import sys

from changestream.cli.commands import main

sys.exit(main())
