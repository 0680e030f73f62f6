"""Spark-backed features: the state reader and batch replay (need pyspark)."""
