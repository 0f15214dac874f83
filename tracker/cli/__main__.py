"""``python -m tracker.cli``."""

from . import main

main()
