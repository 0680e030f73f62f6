"""``wmcheck reset-offsets``: ``kafka-consumer-groups --reset-offsets`` for a Structured Streaming query's checkpoint."""
from __future__ import annotations

from datetime import tzinfo

import click

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.sources.kafka_topics import DEFAULT_TIMEOUT_S

from .options import TIMEOUT_KEY, common_options, gc_paused, options_object
from .output import make_output
from .repair import SinkRepairArgs, repair_options, sink_options


@dataclass(frozen=True)
class ResetOffsetsArgs(SinkRepairArgs):
    """``wmcheck reset-offsets``' options: where the Kafka source starts, and how the new offsets are printed."""

    source: str | None
    topic: tuple[str, ...]
    to_datetime: str | None
    by_duration: str | None
    to_offset: int | None
    shift_by: int | None
    to_earliest: bool
    to_latest: bool
    from_file: str | None
    file_sink: str | None
    export: bool

    def request(self, timeout: float | None) -> repair.ResetOffsetsRequest:
        """The library's request (``timeout``: ``--timeout``, how long the broker may take)."""
        return repair.ResetOffsetsRequest(
            source=self.source, topic=tuple(self.topic), to_datetime=self.to_datetime, by_duration=self.by_duration,
            to_offset=self.to_offset, shift_by=self.shift_by, to_earliest=self.to_earliest, to_latest=self.to_latest,
            from_file=self.from_file, file_sink=self.file_sink, **self.sinks(),
            timeout_s=float(timeout) if timeout is not None else DEFAULT_TIMEOUT_S)


@click.command("reset-offsets")
@click.argument("checkpoint")
@click.option("--source", metavar="ID", help="The Kafka source to reset (its id in offsets/, or its index); needed when "
              "the query reads several.")
@click.option("--topic", multiple=True, metavar="T[:P,...]",
              help="Only this topic, or these partitions of it (repeatable; default: every partition the source reads).")
@click.option("--to-datetime", metavar="TIME", help="The first offset at or after TIME (ISO-8601, no zone = UTC; epoch "
              "ms); the end where no record is that late. Asks the broker.")
@click.option("--by-duration", metavar="DURATION", help="The first offset at or after now minus DURATION (PT2H30M, or "
              '"2 hours 30 minutes"). Asks the broker.')
@click.option("--to-offset", type=int, metavar="N", help="Offset N in every partition selected.")
@click.option("--shift-by", type=int, metavar="N", help="N records later (negative: earlier) than where the next batch "
              "starts now.")
@click.option("--to-earliest", is_flag=True, help="The earliest offset the broker retains. Asks the broker.")
@click.option("--to-latest", is_flag=True, help="The end of each partition: skip everything written so far. Asks the broker.")
@click.option("--from-file", type=click.Path(dir_okay=False), metavar="CSV",
              help="TOPIC,PARTITION,OFFSET lines (as --export writes them).")
@click.option("--bootstrap-server", metavar="HOST:PORT", help="The Kafka broker: needed by --to-datetime, --by-duration, "
              "--to-earliest, --to-latest; with the others it verifies the offsets lie within the topic.")
@click.option("--kafka-option", "kafka_options", multiple=True, metavar="KEY=VALUE",
              help="A Kafka client setting (librdkafka names: security.protocol=SSL, sasl.mechanism=...; repeatable).")
@click.option("--file-sink", metavar="PATH", help="The query's file sink: gets the log entry of the batch written.")
@sink_options(broker=False)
@click.option("--export", is_flag=True, help="Print the new offsets as CSV (TOPIC,PARTITION,OFFSET) for --from-file.")
@repair_options
@common_options()
@gc_paused
@options_object(ResetOffsetsArgs)
def reset_offsets(checkpoint: str, opts: ResetOffsetsArgs, fmt: str, tz: tzinfo, fs_options: tuple[str, ...]) -> None:
    """Make the next batch of CHECKPOINT start a Kafka source at other offsets (dry run unless --execute).

    Spark ignores startingOffsets once a checkpoint exists. This writes one batch, as Spark's offline
    repartition does, whose end offsets are the new ones: the query's state and watermark are kept, and
    the restarted query reads from there. The table lists, per partition, where the next batch starts
    now (CURRENT-OFFSET) and after the reset (NEW-OFFSET). Undo with wmcheck undo.
    """
    request = opts.request(click.get_current_context().find_root().meta.get(TIMEOUT_KEY))
    result = repair.run(checkpoint, request, opts.run_options(fs_options))
    out = make_output("csv" if opts.export else fmt, tz=tz)
    if opts.export:
        out.rows([{"topic": s.position.rpartition("/")[0], "partition": int(s.position.rpartition("/")[2]),
                   "offset": int(s.after or 0)} for s in result.plan.sources], ["topic", "partition", "offset"])
    else:
        out.repair_result(result)
