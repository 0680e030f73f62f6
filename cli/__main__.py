"""``python -m wmcheck.cli``."""
from .start import main

main()
