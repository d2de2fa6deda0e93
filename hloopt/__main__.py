"""``python -m hloopt`` is the ``hloopt`` command."""

from hloopt.cli.main import main

main()
