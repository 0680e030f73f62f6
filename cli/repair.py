"""``wmcheck rewind``, ``wmcheck set-watermark``, ``wmcheck relocate``, ``wmcheck undo`` and ``wmcheck backups``."""
from __future__ import annotations

from datetime import tzinfo
from typing import Callable, Mapping, TypedDict

import click

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.repair.targets import parse_idle

from .options import common_options, delta_txn_app_id_option, gc_paused, options_object, parse_pairs
from .output import make_output


def repair_options(fn: Callable) -> Callable:
    """Options every repair shares: dry run by default, saved plans, safety checks."""
    for decorate in reversed([
        click.option("--execute", is_flag=True, help="Apply the plan (without it nothing is changed)."),
        click.option("--plan-out", type=click.Path(dir_okay=False), help="Save the plan as JSON to FILE."),
        click.option("--from-plan", type=click.Path(dir_okay=False), help="Use a plan saved by --plan-out "
                     "(refused if the checkpoint changed since)."),
        click.option("--idle", default="10 minutes", show_default=True, metavar="DURATION",
                     help="Refuse when offsets/, commits/ or state/ changed this recently (a bare number is minutes; "
                          "0 disables)."),
        click.option("--force", is_flag=True, help="Apply even if the query looks active."),
        click.option("--backup-dir", metavar="DIR", help="Keep the backup's files here instead of CKPT/_wmcheck/backups."),
    ]):
        fn = decorate(fn)
    return fn


def sink_options(broker: bool) -> Callable[[Callable], Callable]:
    """The query's sinks besides a file sink, for the plan's section "what the sink does" (``broker``: with
    ``--bootstrap-server``/``--kafka-option`` for the Kafka sink's broker)."""
    options = [
        click.option("--delta-sink", metavar="PATH", help="The query's Delta table: say what its sink does with the "
                     "batches the repair makes the query run."),
        click.option("--kafka-sink", metavar="TOPIC", help="The query's Kafka sink topic: say what it gets."),
        click.option("--foreach-batch", is_flag=True, help="The query writes with foreachBatch: say which batch ids "
                     "its function is called with and what they hold."),
    ]
    if broker:
        options += [click.option("--bootstrap-server", metavar="HOST:PORT", help="The Kafka broker of --kafka-sink "
                                 "(asked when a batch runs again)."),
                    click.option("--kafka-option", "kafka_options", multiple=True, metavar="KEY=VALUE",
                                 help="A Kafka client setting (librdkafka names; repeatable).")]

    def decorate(fn: Callable) -> Callable:
        for option in reversed(options):
            fn = option(fn)
        return fn
    return decorate


@dataclass(frozen=True)
class RepairArgs:
    """The options every repair shares (:func:`repair_options`)."""

    execute: bool
    plan_out: str | None
    from_plan: str | None
    idle: str
    force: bool
    backup_dir: str | None

    def run_options(self, fs_options: tuple[str, ...]) -> repair.RunOptions:
        """How the library runs the repair."""
        return repair.RunOptions(execute=self.execute, from_plan=self.from_plan, plan_out=self.plan_out,
                                 idle_ms=parse_idle(self.idle), force=self.force, backup_dir=self.backup_dir,
                                 fs_options=parse_pairs(fs_options, "--fs-option"))


class SinkFields(TypedDict):
    """A repair request's parameters for the query's sinks besides a file sink (``SinksAsked``'s fields)."""

    delta_sink: str | None
    kafka_sink: str | None
    foreach_batch: bool
    bootstrap_server: str | None
    kafka_options: Mapping[str, str] | None


@dataclass(frozen=True)
class SinkRepairArgs(RepairArgs):
    """A repair's options with the query's sinks besides a file sink (:func:`sink_options`, with the broker)."""

    delta_sink: str | None
    kafka_sink: str | None
    foreach_batch: bool
    bootstrap_server: str | None
    kafka_options: tuple[str, ...]

    def sinks(self) -> SinkFields:
        """The request's parameters for the sinks named."""
        return {"delta_sink": self.delta_sink, "kafka_sink": self.kafka_sink, "foreach_batch": self.foreach_batch,
                "bootstrap_server": self.bootstrap_server,
                "kafka_options": parse_pairs(self.kafka_options, "--kafka-option")}


@dataclass(frozen=True)
class RewindArgs(SinkRepairArgs):
    """``wmcheck rewind``'s options."""

    to_batch: int | None
    to_watermark: str | None
    to_time: str | None
    shift: int | None
    file_sink: str | None
    delta_txn_app_id: str | None
    keep_next_offsets: bool
    keep_source_log: bool

    def request(self) -> repair.RewindRequest:
        return repair.RewindRequest(to_batch=self.to_batch, to_watermark=self.to_watermark, to_time=self.to_time,
                                    shift=self.shift, file_sink=self.file_sink, keep_next_offsets=self.keep_next_offsets,
                                    keep_source_log=self.keep_source_log, delta_txn_app_id=self.delta_txn_app_id,
                                    **self.sinks())


@dataclass(frozen=True)
class SetWatermarkArgs(SinkRepairArgs):
    """``wmcheck set-watermark``'s options."""

    watermark: str | None
    allow_raise: bool
    window: str | None
    file_sink: str | None

    def request(self) -> repair.SetWatermarkRequest:
        return repair.SetWatermarkRequest(watermark=self.watermark, allow_raise=self.allow_raise, window=self.window,
                                          file_sink=self.file_sink, **self.sinks())


@dataclass(frozen=True)
class RelocateArgs(RepairArgs):
    """``wmcheck relocate``'s options."""

    path_maps: tuple[str, ...]
    file_sink: str | None

    def request(self) -> repair.RelocateRequest:
        return repair.RelocateRequest(path_map=parse_pairs(self.path_maps, "--path-map"), file_sink=self.file_sink)


def _run(checkpoint: str, request: repair.RepairRequest, opts: RepairArgs, fs_options: tuple[str, ...], fmt: str,
         tz: tzinfo) -> None:
    """Run one repair with the options every repair shares and print its result."""
    make_output(fmt, tz=tz).repair_result(repair.run(checkpoint, request, opts.run_options(fs_options)))


@click.command()
@click.argument("checkpoint")
@click.option("--to-batch", type=int, metavar="N", help="Make batch N the last committed batch (Spark restarts "
              "from it only while offsets/N-1 exists, or N is 0, or with --keep-next-offsets).")
@click.option("--to-watermark", metavar="TIME", help="The last batch that leaves the watermark at or before TIME.")
@click.option("--to-time", metavar="TIME", help="The last batch that ran (batchTimestampMs) at or before TIME.")
@click.option("--shift", type=int, metavar="-K", help="K batches before the last committed one.")
@click.option("--file-sink", metavar="PATH", help="Also rewind this file sink's _spark_metadata and move out its orphaned files.")
@click.option("--delta-sink", metavar="PATH", help="The query's Delta table: say what its sink does with the re-run batches; with --execute, "
              "restore it so that they are written (undo restores it again).")
@delta_txn_app_id_option()
@click.option("--kafka-sink", metavar="TOPIC", help="The query's Kafka sink topic: count the records the re-run batches "
              "write again (asks --bootstrap-server).")
@click.option("--bootstrap-server", metavar="HOST:PORT", help="The Kafka broker of --kafka-sink.")
@click.option("--kafka-option", "kafka_options", multiple=True, metavar="KEY=VALUE", help="A Kafka client setting "
              "(librdkafka names; repeatable).")
@click.option("--foreach-batch", is_flag=True, help="The query writes with foreachBatch: name the batch ids its function "
              "is called with again.")
@click.option("--keep-next-offsets", is_flag=True, help="Keep offsets/N+1 so batch N+1 re-runs with its recorded offsets.")
@click.option("--keep-source-log", is_flag=True, help="Leave file-source logs as they are (see docs/repair.md).")
@repair_options
@common_options()
@gc_paused
@options_object(RewindArgs)
def rewind(checkpoint: str, opts: RewindArgs, fmt: str, tz: tzinfo, fs_options: tuple[str, ...]) -> None:
    """Roll CHECKPOINT back so that an earlier batch is the last committed one (dry run unless --execute).

    TIME is ISO-8601, epoch milliseconds, or a duration relative to now or the watermark
    ("now-2 hours", "watermark-30 minutes"; a bare "-2 hours" is relative to now for --to-time and
    to the current watermark for --to-watermark).
    """
    _run(checkpoint, opts.request(), opts, fs_options, fmt, tz)


@click.command("set-watermark")
@click.argument("checkpoint")
@click.option("--watermark", metavar="TIME", help='The new watermark: ISO-8601, epoch ms, or "-2 hours" (from the current one).')
@click.option("--allow-raise", is_flag=True, help="Allow a watermark above the current one.")
@click.option("--window", metavar="DURATION", help="The query's window length, to list windows re-opened in append mode.")
@click.option("--file-sink", metavar="PATH", help="The query's file sink: say what it does with a planned batch run "
              "again (its log is left alone).")
@sink_options(broker=True)
@repair_options
@common_options()
@gc_paused
@options_object(SetWatermarkArgs)
def set_watermark(checkpoint: str, opts: SetWatermarkArgs, fmt: str, tz: tzinfo,
                  fs_options: tuple[str, ...]) -> None:
    """Set the watermark the next batch of CHECKPOINT starts from (dry run unless --execute)."""
    _run(checkpoint, opts.request(), opts, fs_options, fmt, tz)


@click.command()
@click.argument("checkpoint")
@click.option("--path-map", "path_maps", multiple=True, metavar="FROM=TO",
              help="The input (and with --file-sink the output) moved from FROM to TO: rewrite the logged file paths (repeatable).")
@click.option("--file-sink", metavar="PATH", help="Also rewrite this file sink's _spark_metadata paths with --path-map.")
@repair_options
@common_options()
@gc_paused
@options_object(RelocateArgs)
def relocate(checkpoint: str, opts: RelocateArgs, fmt: str, tz: tzinfo, fs_options: tuple[str, ...]) -> None:
    """Make a copied or moved CHECKPOINT name its own files (dry run unless --execute).

    transformWithState records absolute schema file locations: Spark fails to restart a copy or a
    moved checkpoint (and to read its state) until they name the files where the checkpoint is now.
    File sources and file sinks log every file by absolute path: after the input moved, Spark takes
    every file at the new place for a new one (and processes it again) unless --path-map FROM=TO
    rewrites the logged paths.
    """
    _run(checkpoint, opts.request(), opts, fs_options, fmt, tz)


@click.command()
@click.argument("checkpoint")
@click.option("--backup", "backup_id", metavar="ID", help="The backup to restore (default: the latest repair).")
@click.option("--force", is_flag=True, help="Restore even if files changed since; files in the way go to the backup.")
@click.option("--idle", default="10 minutes", show_default=True, metavar="DURATION",
              help="Refuse when the query looks active (a bare number is minutes; 0 disables).")
@click.option("--file-sink", metavar="PATH", help="The file sink to restore when the checkpoint was copied or moved "
              "since the repair (default: the one the repair changed).")
@common_options()
@gc_paused
def undo(checkpoint: str, backup_id, force, idle, file_sink, fmt, tz, fs_options) -> None:
    """Restore CHECKPOINT (and its file sink) byte for byte from a wmcheck backup."""
    make_output(fmt, tz=tz).undo_result(repair.undo_repair(checkpoint, backup_id=backup_id, force=force,
                                                           idle_ms=parse_idle(idle), file_sink=file_sink,
                                                           fs_options=parse_pairs(fs_options, "--fs-option")))


@click.command()
@click.argument("checkpoint")
@common_options()
def backups(checkpoint: str, fmt, tz, fs_options) -> None:
    """List the backups wmcheck made of CHECKPOINT, oldest first."""
    make_output(fmt, tz=tz).backups(repair.list_backups(checkpoint, fs_options=parse_pairs(fs_options, "--fs-option")))

