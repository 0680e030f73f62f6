"""Checkpoint model: pure parsers, file access, derived facts."""
