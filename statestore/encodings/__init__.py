"""How state keys and values are encoded: UnsafeRow, Avro, the providers' key encoders, join rows."""
