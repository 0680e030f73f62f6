"""What wmcheck knows of each kind of streaming source beyond its offsets in ``offsets/N``: one module per kind
(:mod:`.kafka_topics`: the live Kafka topics a Kafka source reads)."""
