"""What needs Spark: its state reader and session, replay, the repartition runner, compat."""
