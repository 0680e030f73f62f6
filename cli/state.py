"""``wmcheck state``."""
from __future__ import annotations

import contextlib
from datetime import tzinfo
from typing import Any

import click

from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.timeutil import format_duration, format_ms, parse_time_ms

from .options import common_options, parse_pairs
from .output import FORMATS, make_output

STORE_COLUMNS = ["operator_id", "operator", "store", "rows", "per partition", "event-time column",
                 "older than watermark", "oldest event time", "behind watermark"]
ROW_COLUMNS = ["operator_id", "store", "partition_id", "key", "value", "event_time_ms"]
TABLE_ROW_COLUMNS = ["operator_id", "store", "partition_id", "key", "value", "event time", "behind watermark"]
BAR = 40


@click.command()
@click.argument("checkpoint")
@click.option("--operator", type=click.IntRange(min=0), help="Only this stateful operator (see the summary for ids).")
@click.option("--store", help="Only this store (e.g. a join's left-keyWithIndexToValue).")
@click.option("--join-side", type=click.Choice(["left", "right"]), help="Only this side of a stream-stream join.")
@click.option("--state-var", help="Only this transformWithState state variable (timers: $eventTimers_keyToTimestamp).")
@click.option("--batch", type=int, help="The state batch N starts from and the watermark it evicts with (default: the next batch).")
@click.option("--older-than-watermark", "older", is_flag=True, help="List the keys (and values) the watermark evicts.")
@click.option("--watermark", metavar="TIME", help="What-if watermark: ISO time, epoch ms or e.g. 'watermark-1 hour'.")
@click.option("--limit", type=click.IntRange(min=1), help="With --older-than-watermark: only the K oldest rows.")
@click.option("--output", type=click.Path(dir_okay=False, writable=True), help="Write to FILE (needed for --format parquet).")
@click.option("--master", help="Spark master (default local[*]; a session already running in the process is reused).")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE", help="Spark conf, e.g. spark.hadoop.fs.s3a.endpoint=... (repeatable).")
@click.option("--remote", metavar="sc://HOST", help="Read through Spark Connect (the server must reach the checkpoint); "
              "local[*] starts a Connect server in this process.")
@common_options(FORMATS + ("parquet",))
def state(checkpoint: str, operator: int | None, store: str | None, join_side: str | None, state_var: str | None,
          batch: int | None, older: bool, watermark: str | None, limit: int | None, output: str | None,
          master: str | None, confs: tuple[str, ...], remote: str | None, fmt: str, tz: tzinfo, fs_options: tuple[str, ...]) -> None:
    """Stateful operators of CHECKPOINT read with Spark's state reader: rows per store and partition,
    the event-time column that evicts them, and the keys older than the watermark (see docs/state.md)."""
    if sum(map(bool, (store, join_side, state_var))) > 1:
        raise click.UsageError("use only one of --store, --join-side and --state-var")
    if fmt == "parquet" and not (older and output):
        raise click.UsageError("--format parquet writes the rows of --older-than-watermark to --output FILE")
    if limit is not None and not older:
        raise click.UsageError("--limit applies to --older-than-watermark")
    ckpt = open_checkpoint(checkpoint, parse_pairs(fs_options, "--fs-option"))
    from wmcheck.statestore.discovery import select
    from wmcheck.statestore.reader import summarize, target
    from wmcheck.statestore.relocated_view import reader_location
    from wmcheck.statestore.session import session_scope

    selection = store or join_side or state_var
    kind = "store" if store else "join_side" if join_side else "state_var" if state_var else None
    select(ckpt, operator, selection, kind)  # an unknown operator or store fails here, before Spark starts
    reader_location(ckpt)  # so does a copied remote checkpoint whose metadata names schema files elsewhere
    base = target(ckpt, batch).watermark_ms
    watermark_ms = None if watermark is None else parse_time_ms(watermark, watermark_ms=base, default_anchor="watermark")
    with session_scope(master, parse_pairs(confs, "--conf"), remote) as spark:
        if older:
            _older(spark, ckpt, operator, selection, batch, watermark_ms, limit, fmt, output, tz)
            return
        doc = summarize(spark, ckpt, operator, selection, batch, watermark_ms, tz)
    with _stream(output) as stream:
        make_output(fmt, stream).document(doc, _fields(doc), _tables(doc, tz))


@contextlib.contextmanager
def _stream(output: str | None):
    if output is None:
        yield None
        return
    with open(output, "w", encoding="utf-8") as fh:
        yield fh


def _older(spark, ckpt, operator: int | None, selection: str | None, batch: int | None, watermark_ms: int | None,
           limit: int | None, fmt: str, output: str | None, tz: tzinfo) -> None:
    from wmcheck.statestore.reader import older_tables, one_table, read_stores, table_rows

    reads = read_stores(spark, ckpt, operator, selection, batch, watermark_ms)
    tables = older_tables(reads, limit)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        table = one_table(reads, tables, limit)
        pq.write_table(table, output)
        make_output("table").write(f"wrote {table.num_rows} rows to {output}")
        return
    rows = table_rows(tables, limit)
    with _stream(output) as stream:
        out = make_output(fmt, stream)
        if fmt != "table":
            out.rows(rows, ROW_COLUMNS)
            return
        tgt = reads[0].target
        notes = [f"operator {r.store.operator_id} {r.store.name}: {r.rule.rule}" for r in reads if not r.rule.evictable]
        title = "\n".join([f"watermark {tgt.watermark_ms} ({format_ms(tgt.watermark_ms, tz)}, {tgt.watermark_from})", *notes])
        out.rows([_table_row(r, tgt.watermark_ms, tz) for r in rows], TABLE_ROW_COLUMNS, title=title)


def _table_row(row: dict[str, Any], watermark_ms: int, tz: tzinfo) -> dict[str, Any]:
    ms = row["event_time_ms"]
    return {**row, "event time": format_ms(ms, tz), "behind watermark": format_duration(None if ms is None else watermark_ms - ms)}


def _fields(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        ("checkpoint", doc["checkpoint"]),
        ("batch", f"{doc['batch']} (state written by batch {doc['state_batch_id']})"),
        ("watermark", f"{doc['watermark_ms']} ({doc['watermark']}, {doc['watermark_from']})"),
    ]


def _tables(doc: dict[str, Any], tz: tzinfo) -> list[tuple[str, list[dict[str, Any]], list[str]]]:
    stores = doc["stores"]
    rows = [{
        "operator_id": s["operator_id"],
        "operator": (s["operator_name"] or "?") + (" (inferred)" if s["operator_name_inferred"] else ""),
        "store": s["store"],
        "rows": s["rows"],
        "per partition": " ".join(f"{p}:{n}" for p, n in s["rows_per_partition"].items()),
        "event-time column": s["event_time_column"] or "none: never evicted",
        "older than watermark": s["older_than_watermark"] if s["evictable"] else None,
        "oldest event time": format_ms(s["oldest_event_time_ms"], tz),
        "behind watermark": format_duration(s["oldest_behind_watermark_ms"]),
    } for s in stores]
    tables = [("Stores", rows, STORE_COLUMNS),
              ("Eviction", [{"operator_id": s["operator_id"], "store": s["store"], "rule": s["eviction"]} for s in stores],
               ["operator_id", "store", "rule"])]
    for s in stores:
        if s["histogram"] and s["rows"]:
            tables.append((f"Operator {s['operator_id']} {s['store']}: event time minus watermark (rows)",
                           _bars(s["histogram"]), ["bucket", "rows", "histogram"]))
    return tables


def _bars(histogram: list[dict[str, Any]]) -> list[dict[str, Any]]:
    top = max(b["rows"] for b in histogram) or 1
    return [{"bucket": b["bucket"], "rows": b["rows"], "histogram": "#" * max(1, round(BAR * b["rows"] / top))}
            for b in histogram if b["rows"]]
