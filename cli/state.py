"""``wmcheck state``."""
from __future__ import annotations

import contextlib
from datetime import tzinfo
from typing import TYPE_CHECKING, Iterator

import click

from wmcheck.checkpoint.broken_tail import broken_tail_warning
from wmcheck.checkpoint.model import Checkpoint, open_checkpoint
from wmcheck.checkpoint.timeutil import parse_time_ms

from .flags import for_cli
from .options import checkpoint_progress, common_options, parse_pairs, parse_size, progress_option
from .output import FORMATS, make_output, output_to
from .process import lean_imports
from .progress import Progress, progress_for, quiet_option
from .spark import command_session

if TYPE_CHECKING:
    from wmcheck.statestore.engines import StateEngine
    from wmcheck.statestore.plan import EngineChoice, EngineName


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
@click.option("--engine", type=click.Choice(["auto", "python", "spark"]), default="auto", show_default=True,
              help="python reads the state files without a JVM; auto uses it when it reads every selected store, else Spark.")
@click.option("--jobs", type=click.IntRange(min=1), help="Worker processes of the python engine (default: every core).")
@click.option("--max-memory", metavar="SIZE", help="Stop with an error once the python engine and its workers hold more "
              "memory, e.g. 4G (default: the memory available when it starts).")
@progress_option()
@quiet_option()
@common_options(FORMATS + ("parquet",))
def state(checkpoint: str, operator: int | None, store: str | None, join_side: str | None, state_var: str | None,
          batch: int | None, older: bool, watermark: str | None, limit: int | None, output: str | None,
          master: str | None, confs: tuple[str, ...], remote: str | None, engine: EngineChoice, jobs: int | None,
          max_memory: str | None, progress: str | None, quiet: bool, fmt: str, tz: tzinfo,
          fs_options: tuple[str, ...]) -> None:
    """Stateful operators of CHECKPOINT, read from the state files (or with Spark's state reader): rows per
    store and partition, the event-time column that evicts them, and the keys older than each operator's own
    watermark (see docs/state.md; --progress gives Spark's event log, where the plan decides an operator's
    watermark, e.g. after a stream-stream join)."""
    if sum(map(bool, (store, join_side, state_var))) > 1:
        raise click.UsageError("use only one of --store, --join-side and --state-var")
    if fmt == "parquet" and not (older and output):
        raise click.UsageError("--format parquet writes the rows of --older-than-watermark to --output FILE")
    if limit is not None and not older:
        raise click.UsageError("--limit applies to --older-than-watermark")
    budget = parse_size(max_memory, "--max-memory") if max_memory else None
    options = parse_pairs(fs_options, "--fs-option")
    ckpt = open_checkpoint(checkpoint, options)
    make_output(fmt if fmt != "parquet" else "table").warning(broken_tail_warning(ckpt))
    from wmcheck.statestore.plan import plan_state
    from wmcheck.statestore.targets import target

    selection = store or join_side or state_var
    kind = "store" if store else "join_side" if join_side else "state_var" if state_var else None
    base = target(ckpt, batch).watermark_ms
    watermark_ms = None if watermark is None else parse_time_ms(watermark, watermark_ms=base, default_anchor="watermark")
    if engine == "auto" and (master or confs or remote):
        engine = "spark"
    # once, before the state (or a JVM) is touched: an unknown operator or store fails here, and with --older-than-
    # watermark an operator whose own watermark is unknown
    plan = plan_state(ckpt, operator, selection, kind, batch, watermark_ms, checkpoint_progress(ckpt, progress, options),
                      engine, older)
    if plan.note:
        click.echo(f"note: {for_cli(plan.note)}", err=True)
    with _engine(plan.engine, ckpt, master, confs, remote, jobs, budget, progress_for(quiet)) as eng:
        if older:
            reads = eng.read_stores(plan)
            with output_to(fmt, output, tz) as out:
                if limit is not None:
                    out.older_state(reads, eng.older_tables(reads, limit), limit)
                else:
                    out.older_rows(reads, eng.older_parts(reads) if out.row_parts else eng.older_batches(reads))
            return
        summary = eng.summarize(plan, tz)
    with output_to(fmt, output, tz) as out:
        out.state_summary(summary)


@contextlib.contextmanager
def _engine(name: EngineName, ckpt: Checkpoint, master: str | None, confs: tuple[str, ...], remote: str | None,
            jobs: int | None, budget: int | None, progress: Progress) -> Iterator[StateEngine]:
    """The engine called ``name``, with what it needs for the command: for the python engine its workers,
    a memory budget (default: the memory available now) and pandas kept out of the process; for Spark's a
    session."""
    from wmcheck.statestore.engines import engine_for

    if name == "python":
        from wmcheck.statestore.engine.workers import available_memory, default_jobs

        with lean_imports():
            yield engine_for(name, jobs=jobs or default_jobs(), max_memory=budget or available_memory())
        return
    from wmcheck.statestore.spark.relocated_view import reader_location

    reader_location(ckpt)  # a copied remote checkpoint whose metadata names schema files elsewhere fails before Spark starts
    with command_session(master, parse_pairs(confs, "--conf"), remote, progress, "reading state with Spark") as spark:
        yield engine_for(name, spark)
