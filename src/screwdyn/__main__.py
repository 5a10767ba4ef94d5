"""``python -m screwdyn`` is the ``screwdyn`` command."""
import sys

from .cli import main

sys.exit(main())
