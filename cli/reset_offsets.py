"""``wmcheck reset-offsets``: ``kafka-consumer-groups --reset-offsets`` for a Structured Streaming query's checkpoint."""
from __future__ import annotations

import click

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.sources.kafka_topics import DEFAULT_TIMEOUT_S

from .options import TIMEOUT_KEY, common_options, gc_paused, parse_pairs
from .output import make_output
from .repair import repair_options, run_options, sink_options


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
def reset_offsets(checkpoint: str, source, topic, to_datetime, by_duration, to_offset, shift_by, to_earliest, to_latest,
                  from_file, bootstrap_server, kafka_options, file_sink, delta_sink, kafka_sink, foreach_batch, export, execute, plan_out, from_plan, idle, force,
                  backup_dir, fmt, tz, fs_options) -> None:
    """Make the next batch of CHECKPOINT start a Kafka source at other offsets (dry run unless --execute).

    Spark ignores startingOffsets once a checkpoint exists. This writes one batch, as Spark's offline
    repartition does, whose end offsets are the new ones: the query's state and watermark are kept, and
    the restarted query reads from there. The table lists, per partition, where the next batch starts
    now (CURRENT-OFFSET) and after the reset (NEW-OFFSET). Undo with wmcheck undo.
    """
    timeout = click.get_current_context().find_root().meta.get(TIMEOUT_KEY)
    request = repair.ResetOffsetsRequest(
        source=source, topic=tuple(topic), to_datetime=to_datetime, by_duration=by_duration, to_offset=to_offset,
        shift_by=shift_by, to_earliest=to_earliest, to_latest=to_latest, from_file=from_file,
        bootstrap_server=bootstrap_server, kafka_options=parse_pairs(kafka_options, "--kafka-option"),
        file_sink=file_sink, delta_sink=delta_sink, kafka_sink=kafka_sink, foreach_batch=foreach_batch, timeout_s=float(timeout) if timeout is not None else DEFAULT_TIMEOUT_S)
    result = repair.run(checkpoint, request, run_options(execute, plan_out, from_plan, idle, force, backup_dir,
                                                         fs_options))
    out = make_output("csv" if export else fmt, tz=tz)
    if export:
        out.rows([{"topic": s.position.rpartition("/")[0], "partition": int(s.position.rpartition("/")[2]),
                   "offset": int(s.after or 0)} for s in result.plan.sources], ["topic", "partition", "offset"])
    else:
        out.repair_result(result)
