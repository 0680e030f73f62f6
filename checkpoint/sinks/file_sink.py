"""A file sink: what a batch id run again does to it. Spark's file sink skips a batch whose id is at most the latest
batch its ``_spark_metadata`` log holds (the batch wrote its files and log entry before): nothing is written for it,
its files stay as first written (tests/test_repair_sinks.py makes it happen); a later id is written."""
from __future__ import annotations

from typing import Iterable

from ..fs.base import FileSystem
from ..logs.metadata_log import FILE_SINK_LOG, MetadataLog
from . import SinkBatch, SinkEffect


def rerun_effect(fs: FileSystem, location: str, query_id: str, batches: Iterable[int]) -> SinkEffect:
    """What the file sink at ``location`` (``fs``) does with ``batches`` run again."""
    latest = MetadataLog.listed(fs, FILE_SINK_LOG.directory).latest
    rows = tuple(SinkBatch(b, "skip" if latest is not None and b <= latest else "write", None, 0, None)
                 for b in sorted(batches))
    skipped = [b.batch for b in rows if b.action == "skip"]
    written = [b.batch for b in rows if b.action == "write"]
    said = []
    if skipped:
        said.append(f"its log holds batch {latest}: Spark's file sink skips the re-run batch(es) "
                    f"{', '.join(map(str, skipped))} and writes nothing for them (their files stay as first written)")
    if written:
        said.append(f"the re-run batch(es) {', '.join(map(str, written))} are written (its log holds "
                    + (f"batches up to {latest})" if latest is not None else "none)"))
    return SinkEffect("file", location, query_id, latest, rows, "; ".join(said) or "no batch runs again")
