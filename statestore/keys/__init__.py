"""State keys: which partition Spark sends a key to, and keys an eviction had already removed."""
