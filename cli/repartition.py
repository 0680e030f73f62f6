"""``wmcheck repartition``."""
from __future__ import annotations

from datetime import tzinfo

import click

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.spark.repartition import SparkRepartitioner

from .options import common_options, options_object, parse_pairs
from .output import make_output
from .progress import progress_for, quiet_option, spark_progress
from .repair import SinkRepairArgs, repair_options, sink_options


@dataclass(frozen=True)
class RepartitionArgs(SinkRepairArgs):
    """``wmcheck repartition``'s options: the new partitions, the file sink, Spark's."""

    partitions: int | None
    file_sink: str | None
    master: str | None
    confs: tuple[str, ...]
    remote: str | None
    quiet: bool

    def request(self) -> repair.RepartitionRequest:
        """The library's request, run by Spark's repartition in this process."""
        runner = SparkRepartitioner(master=self.master, conf=parse_pairs(self.confs, "--conf"), remote=self.remote)
        return repair.RepartitionRequest(partitions=self.partitions, file_sink=self.file_sink, runner=runner,
                                         **self.sinks())


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
@options_object(RepartitionArgs)
def repartition(checkpoint: str, opts: RepartitionArgs, fmt: str, tz: tzinfo, fs_options: tuple[str, ...]) -> None:
    """Move the state of a stopped query to --partitions N partitions with Spark's offline state repartition
    (pyspark 4.2+, RocksDB state), dry run unless --execute; see docs/repair.md."""
    request, options = opts.request(), opts.run_options(fs_options)
    with spark_progress(progress_for(opts.quiet or not opts.execute), "repartitioning: starting Spark"):  # the plan needs no Spark
        result = repair.run(checkpoint, request, options)
    make_output(fmt, tz=tz).repair_result(result)
