"""``wmcheck check``."""
from __future__ import annotations

import contextlib
import glob
import os
import sys
import time
from datetime import tzinfo
from typing import Callable

import click

from wmcheck.checkpoint.checks.context import STALL_BATCHES
from wmcheck.checkpoint.errors import on_param
from wmcheck.checkpoint.fs import scheme_of
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.sinks.delta import check_txn_app_id, read_delta_log
from wmcheck.checkpoint.sources.kafka_topics import DEFAULT_TIMEOUT_S, KafkaTopics
from wmcheck.checkpoint.timeutil import parse_duration_ms
from wmcheck.checkpoint.validate import check_location, fails, open_file_sink, select_checks
from wmcheck.checkpoint.watermarks.progress_files import read_records

from .flags import for_cli
from .main import EXIT_INPUT
from .options import (
    TIMEOUT_KEY,
    common_options,
    delta_txn_app_id_option,
    gc_paused,
    options_object,
    parse_pairs,
    progress_option,
)
from .output import FORMATS, REPORT_OUTPUTS, make_output
from .process import lean_imports
from .reports import Result
from .text import printable

PROGRESS_AFTER_S = 1.0
"""A state verification that takes longer shows its progress."""


def codes(text: str | None) -> list[str] | None:
    """``WM001,WM002`` (spaces allowed) as a list."""
    return [c.strip().upper() for c in text.split(",") if c.strip()] if text else None


def expand(locations: tuple[str, ...]) -> list[str]:
    """Shell-style globs for local paths the shell left unexpanded (quoted, or on Windows)."""
    out = []
    for loc in locations:
        matches = [] if scheme_of(loc) or os.path.exists(loc) or not glob.has_magic(loc) else sorted(glob.glob(loc))
        out += matches or [loc]
    return out


def progress_line(location: str) -> Callable[[int, int], None] | None:
    """A progress line on stderr while state contents are decoded, when stderr is a terminal (None otherwise)."""
    if not sys.stderr.isatty():
        return None
    started = time.monotonic()

    def show(done: int, total: int) -> None:
        if time.monotonic() - started < PROGRESS_AFTER_S:
            return
        end = "\n" if done == total else ""
        click.echo(f"\rverifying state of {location}: {done}/{total} store partitions", err=True, nl=bool(end))

    return show


@dataclass(frozen=True)
class CheckArgs:
    """``wmcheck check``'s options: which checks, what fails, where the report goes, and what else the query wrote
    to or read from (its file sink, its Delta tables, its Kafka broker)."""

    file_sink: str | None
    strict: bool
    output: str | None
    select: str | None
    ignore: str | None
    stall_batches: int
    no_content: bool
    operator_lag: str | None
    progress: str | None
    bootstrap_server: str | None
    kafka_options: tuple[str, ...]
    subscribe_pattern: str | None
    delta_sink: str | None
    delta_txn_app_id: str | None
    delta_sources: tuple[str, ...]

    def validate(self, checkpoints: tuple[str, ...]) -> None:
        """A file sink and Delta tables belong to one checkpoint."""
        for given, flag in ((self.file_sink, "--file-sink"), (self.delta_sink, "--delta-sink"),
                            (self.delta_sources, "--delta-source")):
            if given and len(checkpoints) > 1:
                raise click.UsageError(f"{flag} belongs to one checkpoint: pass exactly one CKPT with it")

    def kafka(self) -> KafkaTopics | None:
        """The broker of ``--bootstrap-server``, answering (None without it)."""
        timeout = click.get_current_context().find_root().meta.get(TIMEOUT_KEY)
        if self.subscribe_pattern is not None and not self.bootstrap_server:
            raise click.UsageError("--subscribe-pattern needs --bootstrap-server (the broker lists the topics it matches)")
        kafka = KafkaTopics(self.bootstrap_server, parse_pairs(self.kafka_options, "--kafka-option"),
                            float(timeout) if timeout is not None else DEFAULT_TIMEOUT_S, self.subscribe_pattern) \
            if self.bootstrap_server else None
        if kafka is not None:
            kafka.ping()
        return kafka


@click.command()
@click.argument("checkpoints", nargs=-1, required=True, metavar="CKPT...")
@click.option("--file-sink", metavar="PATH", help="Also check this file sink's _spark_metadata against the checkpoint.")
@click.option("--strict", is_flag=True, help="Warnings fail too (exit 1).")
@click.option("--output", "output", type=click.Path(dir_okay=False), help="Write the report to FILE instead of stdout.")
@click.option("--select", metavar="CODES", help="Run only these checks, e.g. WM002,WM016.")
@click.option("--ignore", metavar="CODES", help="Skip these checks, e.g. WM011.")
@click.option("--stall-batches", type=click.IntRange(min=1), default=STALL_BATCHES, show_default=True,
              help="Warn (WM038) once a watermark held back by an idle input spans this many data batches.")
@click.option("--no-content", is_flag=True, help="Check state files by name only, without decoding the files the "
              "next batch loads (WM039, WM040).")
@click.option("--operator-lag", metavar="DURATION", help="Warn (WM042) once a stateful operator's own eviction watermark "
              "lags the global one by more than this (default: the query's withWatermark delay), e.g. '10 minutes'.")
@click.option("--bootstrap-server", metavar="HOST:PORT", help="The Kafka broker: compare each Kafka source's offsets "
              "with its topics as they are now (WM081-WM084).")
@click.option("--delta-sink", metavar="PATH", help="The query's Delta sink table: report it re-created (WM086) or "
              "restored below batches the query committed (WM087).")
@delta_txn_app_id_option()
@click.option("--delta-source", "delta_sources", multiple=True, metavar="PATH", help="A Delta table the query reads "
              "(repeatable; matched to its source by the offsets' reservoirId): report it re-created (WM089), the "
              "commits (WM090) or data files (WM091) the next batch reads gone.")
@click.option("--kafka-option", "kafka_options", multiple=True, metavar="KEY=VALUE",
              help="A Kafka client setting (librdkafka names: security.protocol=SSL, sasl.mechanism=...; repeatable).")
@click.option("--subscribe-pattern", metavar="REGEX", help="With --bootstrap-server: the subscribePattern of a Kafka "
              "source (the checkpoint names only the topics read so far): report the new topics it matches (WM088).")
@progress_option()
@common_options(FORMATS + tuple(REPORT_OUTPUTS))
@gc_paused
@options_object(CheckArgs)
def check(checkpoints: tuple[str, ...], opts: CheckArgs, fmt: str, tz: tzinfo, fs_options: tuple[str, ...]) -> None:
    """Validate each CKPT: every inconsistency that makes Spark fail, lose data or misbehave on restart.

    Exit 0: no errors (warnings allowed unless --strict); 1: findings that fail; 2: a checkpoint or
    option that cannot be read. Codes and fixes: docs/check.md.
    """
    opts.validate(checkpoints)
    options = parse_pairs(fs_options, "--fs-option")
    chosen = select_checks(codes(opts.select), codes(opts.ignore) or ())
    sink = open_file_sink(opts.file_sink, options, lost_log=True) if opts.file_sink else None
    app_id = check_txn_app_id(opts.delta_txn_app_id, opts.delta_sink)
    delta = read_delta_log(opts.delta_sink, options) if opts.delta_sink else None
    records = read_records(opts.progress, options) if opts.progress else None
    with on_param("operator_lag"):
        lag_ms = parse_duration_ms(opts.operator_lag) if opts.operator_lag is not None else None
    kafka = opts.kafka()
    notes: list[str] = []
    with lean_imports():
        results = [
            Result(loc, check_location(loc, sink, fs_options=options, checks=chosen, tz=tz, stall_batches=opts.stall_batches,
                                       progress=records.reports if records else (), plans=records.plans if records else (),
                                       operator_lag_ms=lag_ms, content=not opts.no_content, state_progress=progress_line(loc),
                                       notes=notes, kafka=kafka, delta=delta, delta_sources=opts.delta_sources,
                                       delta_app_id=app_id), chosen,
                   sink is not None)
            for loc in expand(checkpoints)
        ]
    for note in dict.fromkeys(notes):
        click.echo(f"note: {printable(for_cli(note))}", err=True)
    with open(opts.output, "w", encoding="utf-8") if opts.output else contextlib.nullcontext() as stream:
        make_output(fmt, stream, tz).findings(results, opts.strict)
    if any(r.unreadable for r in results):
        raise click.exceptions.Exit(EXIT_INPUT)
    if any(fails(f, opts.strict) for r in results for f in r.findings):
        raise click.exceptions.Exit(1)
