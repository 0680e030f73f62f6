"""``python -m wmcheck.cli``."""
from .main import main

main()
