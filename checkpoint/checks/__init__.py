"""The checks behind ``wmcheck check``, one module per area; importing them registers them."""
