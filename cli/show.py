"""``wmcheck show``."""
from __future__ import annotations

from datetime import tzinfo

import click

from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.summary import describe
from wmcheck.checkpoint.timeutil import format_duration

from .options import common_options, parse_pairs
from .output import make_output

OPERATOR_COLUMNS = ["operator_id", "name", "stores", "num_partitions", "min_version", "max_version", "bytes",
                    "snapshots", "deltas", "zips", "changelogs", "next_version", "next_version_loadable"]


def operator_label(op: dict) -> str | None:
    """The operator name, marked when inferred (Spark < 4.0 records none)."""
    return f"{op['name']} (inferred)" if op["name_inferred"] else op["name"]


@click.command()
@click.argument("checkpoint")
@common_options()
def show(checkpoint: str, fmt: str, tz: tzinfo, fs_options: tuple[str, ...]) -> None:
    """Summarise CHECKPOINT: batches, watermark, pinned conf, sources, state operators, warnings."""
    doc = describe(open_checkpoint(checkpoint, parse_pairs(fs_options, "--fs-option")), tz)
    first, last = doc["first_batch"], doc["last_batch"]
    fields = [
        ("query id", doc["query_id"]),
        ("location", doc["location"]),
        ("batches", f"{first}..{last}" if last is not None else "none"),
        ("last committed", doc["last_committed_batch"] if doc["last_committed_batch"] is not None else "none"),
        ("pending batch", doc["pending_batch"] if doc["pending_batch"] is not None else "none"),
        ("next batch", doc["next_batch"]),
        ("watermark", f"{doc['watermark_ms']} ({doc['watermark']})"),
        ("watermark lag", format_duration(doc["watermark_lag_ms"])),
        *[(key.replace("_", " "), value) for key, value in doc["conf"].items() if value is not None],
        *[("warning", w) for w in doc["warnings"]],
    ]
    tables = [
        ("Sources", doc["sources"], ["source_id", "kind", "summary"]),
        ("Stateful operators", [{**op, "name": operator_label(op)} for op in doc["operators"]], OPERATOR_COLUMNS),
    ]
    make_output(fmt).document(doc, fields, tables)
