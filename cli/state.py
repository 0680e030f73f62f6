"""``wmcheck state``."""
from __future__ import annotations

import contextlib
from datetime import tzinfo
from typing import TYPE_CHECKING, Iterator

import click

from wmcheck.checkpoint.broken_tail import broken_tail_warning
from wmcheck.checkpoint.model import Checkpoint, open_checkpoint
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.timeutil import parse_time_ms

from .flags import for_cli
from .options import checkpoint_progress, common_options, options_object, parse_pairs, parse_size, progress_option
from .output import FORMATS, make_output, output_to
from .process import lean_imports
from .progress import progress_for, quiet_option
from .spark import command_session

if TYPE_CHECKING:
    from wmcheck.statestore.engines import StateEngine
    from wmcheck.statestore.plan import EngineChoice, EngineName


@dataclass(frozen=True)
class StateArgs:
    """``wmcheck state``'s options: which stores, which batch and watermark, what to list, and the engine's."""

    operator: int | None
    store: str | None
    join_side: str | None
    state_var: str | None
    batch: int | None
    older: bool
    watermark: str | None
    limit: int | None
    output: str | None
    master: str | None
    confs: tuple[str, ...]
    remote: str | None
    engine: EngineChoice
    jobs: int | None
    max_memory: str | None
    progress: str | None
    quiet: bool

    def validate(self, fmt: str) -> None:
        """Options that go together: one selection; Parquet and --limit only for the rows of --older-than-watermark."""
        if sum(map(bool, (self.store, self.join_side, self.state_var))) > 1:
            raise click.UsageError("use only one of --store, --join-side and --state-var")
        if fmt == "parquet" and not (self.older and self.output):
            raise click.UsageError("--format parquet writes the rows of --older-than-watermark to --output FILE")
        if self.limit is not None and not self.older:
            raise click.UsageError("--limit applies to --older-than-watermark")

    def selection(self) -> tuple[str | None, str | None]:
        """The store selected and what names it (``store``, ``join_side``, ``state_var``; None: every store)."""
        kind = "store" if self.store else "join_side" if self.join_side else "state_var" if self.state_var else None
        return self.store or self.join_side or self.state_var, kind

    def engine_choice(self) -> EngineChoice:
        """The engine asked for: Spark's when a Spark option is given with ``auto``."""
        return "spark" if self.engine == "auto" and (self.master or self.confs or self.remote) else self.engine


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
@options_object(StateArgs)
def state(checkpoint: str, opts: StateArgs, fmt: str, tz: tzinfo, fs_options: tuple[str, ...]) -> None:
    """Stateful operators of CHECKPOINT, read from the state files (or with Spark's state reader): rows per
    store and partition, the event-time column that evicts them, and the keys older than each operator's own
    watermark (see docs/state.md; --progress gives Spark's event log, where the plan decides an operator's
    watermark, e.g. after a stream-stream join)."""
    opts.validate(fmt)
    budget = parse_size(opts.max_memory, "--max-memory") if opts.max_memory else None
    options = parse_pairs(fs_options, "--fs-option")
    ckpt = open_checkpoint(checkpoint, options)
    make_output(fmt if fmt != "parquet" else "table").warning(broken_tail_warning(ckpt))
    from wmcheck.statestore.plan import plan_state
    from wmcheck.statestore.targets import target

    selection, kind = opts.selection()
    base = target(ckpt, opts.batch).watermark_ms
    watermark_ms = None if opts.watermark is None else parse_time_ms(opts.watermark, watermark_ms=base,
                                                                     default_anchor="watermark")
    # once, before the state (or a JVM) is touched: an unknown operator or store fails here, and with --older-than-
    # watermark an operator whose own watermark is unknown
    plan = plan_state(ckpt, opts.operator, selection, kind, opts.batch, watermark_ms,
                      checkpoint_progress(ckpt, opts.progress, options), opts.engine_choice(), opts.older)
    if plan.note:
        click.echo(f"note: {for_cli(plan.note)}", err=True)
    with _engine(plan.engine, ckpt, opts, budget) as eng:
        if opts.older:
            reads = eng.read_stores(plan)
            with output_to(fmt, opts.output, tz) as out:
                if opts.limit is not None:
                    out.older_state(reads, eng.older_tables(reads, opts.limit), opts.limit)
                else:
                    out.older_rows(reads, eng.older_parts(reads) if out.row_parts else eng.older_batches(reads))
            return
        summary = eng.summarize(plan, tz)
    with output_to(fmt, opts.output, tz) as out:
        out.state_summary(summary)


@contextlib.contextmanager
def _engine(name: EngineName, ckpt: Checkpoint, opts: StateArgs, budget: int | None) -> Iterator[StateEngine]:
    """The engine called ``name``, with what it needs for the command: for the python engine its workers,
    a memory budget (default: the memory available now) and pandas kept out of the process; for Spark's a
    session."""
    from wmcheck.statestore.engines import engine_for

    if name == "python":
        from wmcheck.statestore.engine.workers import available_memory, default_jobs

        with lean_imports():
            yield engine_for(name, jobs=opts.jobs or default_jobs(), max_memory=budget or available_memory())
        return
    from wmcheck.statestore.spark.relocated_view import reader_location

    reader_location(ckpt)  # a copied remote checkpoint whose metadata names schema files elsewhere fails before Spark starts
    with command_session(opts.master, parse_pairs(opts.confs, "--conf"), opts.remote, progress_for(opts.quiet),
                         "reading state with Spark") as spark:
        yield engine_for(name, spark)
