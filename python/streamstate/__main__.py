"""``python -m streamstate`` runs the command line."""

import sys

from streamstate.cli import main

sys.exit(main())
