"""``wmcheck repartition``."""
from __future__ import annotations

from datetime import tzinfo

import click

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.repair.targets import parse_idle
from wmcheck.statestore.spark.repartition import SparkRepartitioner

from .options import common_options, parse_pairs
from .output import make_output
from .progress import progress_for, quiet_option, spark_progress
from .repair import repair_options, sink_options


@click.command()
@click.argument("checkpoint")
@click.option("--partitions", type=click.IntRange(min=1), metavar="N",
              help="The new number of state partitions (spark.sql.shuffle.partitions).")
@click.option("--file-sink", metavar="PATH", help="The query's file sink: gets the log entry of the repartition batch "
              "(alone, without --partitions: the entries a repartition made by Spark lacks).")
@click.option("--master", help="Spark master (default local[*]; a session already running in the process is reused).")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE", help="Spark conf (repeatable).")
@click.option("--remote", metavar="sc://HOST", help="Refused: Spark's repartition runs in Spark Classic only.")
@sink_options(broker=True)
@repair_options
@quiet_option()
@common_options()
def repartition(checkpoint: str, partitions, file_sink, master, confs, remote, delta_sink, kafka_sink, foreach_batch,
                bootstrap_server, kafka_options, execute, plan_out, from_plan, idle, force,
                backup_dir, quiet, fmt, tz: tzinfo, fs_options) -> None:
    """Move the state of a stopped query to --partitions N partitions with Spark's offline state repartition
    (pyspark 4.2+, RocksDB state), dry run unless --execute; see docs/repair.md."""
    runner = SparkRepartitioner(master=master, conf=parse_pairs(confs, "--conf"), remote=remote)
    request = repair.RepartitionRequest(partitions=partitions, file_sink=file_sink, runner=runner, delta_sink=delta_sink,
                                        kafka_sink=kafka_sink, foreach_batch=foreach_batch,
                                        bootstrap_server=bootstrap_server,
                                        kafka_options=parse_pairs(kafka_options, "--kafka-option"))
    options = repair.RunOptions(execute=execute, from_plan=from_plan, plan_out=plan_out, idle_ms=parse_idle(idle),
                                force=force, backup_dir=backup_dir, fs_options=parse_pairs(fs_options, "--fs-option"))
    with spark_progress(progress_for(quiet or not execute), "repartitioning: starting Spark"):  # the plan needs no Spark
        result = repair.run(checkpoint, request, options)
    make_output(fmt, tz=tz).repair_result(result)
