"""``python -m popmarl.cli``: the ``popmarl`` command."""

import sys

from popmarl.cli.main import main

sys.exit(main())
