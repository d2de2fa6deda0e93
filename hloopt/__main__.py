"""``python -m hloopt`` is the ``hloopt`` command."""
from hloopt.cli import main

main()
