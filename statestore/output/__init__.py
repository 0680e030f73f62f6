"""State rows as output: Arrow tables, Parquet parts, JSON-ready records."""
