"""The wmcheck command line."""
