"""The ``popmarl`` command line: ``python -m popmarl.cli`` or the ``popmarl`` script."""

from popmarl.cli.main import main

__all__ = ["main"]
