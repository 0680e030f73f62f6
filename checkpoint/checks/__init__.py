"""The checks behind ``wmcheck check``, one module per area, run as :mod:`.registry` lists them."""
