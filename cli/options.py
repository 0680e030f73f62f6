"""Options every command shares, and the small helpers commands use to stay thin."""
from __future__ import annotations

import dataclasses
import functools
import gc
from datetime import tzinfo
from typing import TYPE_CHECKING, Any, Callable, Mapping

import click

from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.timeutil import zone

from .output import FORMATS
from .table_fit import WIDE_KEY

if TYPE_CHECKING:
    from wmcheck.checkpoint.model import Checkpoint
    from wmcheck.checkpoint.watermarks.progress import QueryProgress

PAIR_EXAMPLES = {
    "--fs-option": "endpoint_override=http://localhost:9000",
    "--conf": "spark.sql.shuffle.partitions=8",
    "--option": "multiLine=true",
    "--path-map": "/old/input=/new/input",
}


def parse_pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    """``key=value`` strings as a dict (for --fs-option, --conf, --option, --path-map); ``--fs-option`` also
    carries ``--timeout`` (the ``timeout`` option of every remote store)."""
    out = {}
    if option == "--fs-option":
        ctx = click.get_current_context(silent=True)
        timeout = ctx.find_root().meta.get(TIMEOUT_KEY) if ctx is not None else None
        if timeout is not None:
            out["timeout"] = f"{timeout:g}"
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CheckpointError(f"{option} expects key=value, got {item!r}",
                                  hint=f"e.g. {option} {PAIR_EXAMPLES.get(option, 'key=value')}", param=option)
        out[key.strip()] = value
    return out


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(value: str, option: str) -> int:
    """A size such as ``2G``, ``512M``, ``1.5GiB`` or ``1048576`` (bytes) in bytes."""
    text = value.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (text[:-1], text[-1]) if text[-1:] in _UNITS else (text, "")
    try:
        size = int(float(number) * _UNITS[unit])
    except ValueError:
        size = 0
    if size <= 0:
        raise CheckpointError(f"{option} expects a size such as 2G or 512M, got {value!r}", hint=f"e.g. {option} 4G",
                              param=option)
    return size


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.find_root().meta["wmcheck.debug"] = True
    return value


TIMEOUT_KEY = "wmcheck.timeout"


def _set_timeout(ctx: click.Context, _param: click.Parameter, value: float | None) -> None:
    if value is not None:
        ctx.find_root().meta[TIMEOUT_KEY] = value


def _keep_format(ctx: click.Context, _param: click.Parameter, value: str) -> str:
    ctx.find_root().meta["wmcheck.format"] = value  # errors follow it (cli/main.py)
    return value


def _set_wide(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.find_root().meta[WIDE_KEY] = True


def _zone(_ctx: click.Context, _param: click.Parameter, value: str) -> tzinfo:
    return zone(value)


def common_options(formats: tuple[str, ...] = FORMATS) -> Callable:
    """``--format``, ``--wide``, ``--tz``, ``--fs-option``, ``--timeout`` and ``--debug``."""

    def decorate(fn: Callable) -> Callable:
        fn = click.option("--wide", is_flag=True, expose_value=False, is_eager=True, callback=_set_wide,
                          help="Tables: full text in every cell, lines as long as they are (default: wrapped to the terminal).")(fn)
        fn = click.option("--debug", is_flag=True, expose_value=False, is_eager=True, callback=_set_debug, help="Show tracebacks.")(fn)
        fn = click.option("--timeout", type=click.FloatRange(min=0, min_open=True), expose_value=False, is_eager=True,
                          callback=_set_timeout, metavar="SECONDS",
                          help="How long a remote store may take to connect or answer (default 30).")(fn)
        fn = click.option("--fs-option", "fs_options", multiple=True, metavar="KEY=VALUE", help="pyarrow.fs option for remote checkpoints (repeatable).")(fn)
        fn = click.option("--tz", default="UTC", show_default=True, callback=_zone, help="Time zone for displayed times (IANA name or 'local').")(fn)
        fn = click.option("--format", "fmt", type=click.Choice(formats), default="table", show_default=True, is_eager=True,
                          callback=_keep_format, help="Output format.")(fn)
        return fn

    return decorate


def progress_option() -> Callable:
    """``--progress PATH``: Spark's event logs or JSON lines of StreamingQueryProgress."""
    return click.option("--progress", metavar="PATH", help="Spark's progress: an event log (file or spark.eventLog.dir) "
                        "or JSON lines of StreamingQueryProgress, matched by query id and batch id.")


def delta_txn_app_id_option() -> Callable:
    """``--delta-txn-app-id ID``: the txn app id the Delta sink's writer uses (check and rewind)."""
    return click.option("--delta-txn-app-id", metavar="ID", help="With --delta-sink: the txn app id the table's writer "
                        "uses (the txnAppId writer option of a foreachBatch function's idempotent writes, txnVersion = "
                        "the batch id); default: the query id, as Spark's Delta sink writes.")


def checkpoint_progress(ckpt: "Checkpoint", location: str | None, fs_options: Mapping[str, str]) -> "QueryProgress | None":
    """The progress reports of the checkpoint's query in ``--progress PATH`` (None without the option)."""
    if location is None:
        return None
    from wmcheck.checkpoint.watermarks.progress_files import load_progress

    return load_progress(ckpt.query_metadata.query_id if ckpt.query_metadata else None, location, fs_options)


def gc_paused(fn: Callable) -> Callable:
    """Run a command with the cyclic garbage collector paused: checks and repairs allocate hundreds of thousands
    of small objects without cycles, and collecting them again and again costs a third of the run. A setting of
    the whole process, so the command line makes it, never the library."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return wrapper


def options_object(cls: type, name: str = "opts") -> Callable:
    """Hand a command the values of its options named like the fields of the dataclass ``cls`` as one typed object
    ``name`` (for commands with many options; the command's other parameters stay as they are)."""
    names = [f.name for f in dataclasses.fields(cls)]

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            kwargs[name] = cls(**{n: kwargs.pop(n) for n in names})
            return fn(**kwargs)

        return command

    return decorate

