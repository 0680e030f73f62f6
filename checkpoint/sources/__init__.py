"""What wmcheck knows of each kind of streaming source: one module per kind (:mod:`.file`, :mod:`.kafka`,
:mod:`.delta`, :mod:`.other`), each a :class:`~.protocol.SourceKind`, listed in :mod:`.registry`; and what a kind needs
beyond its offsets in ``offsets/N`` (:mod:`.kafka_topics`: the live Kafka topics a Kafka source reads;
:mod:`.delta_table`, :mod:`.delta_files`: a Delta source's table)."""
