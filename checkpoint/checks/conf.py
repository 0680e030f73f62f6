"""Checks of the confs Spark pins for the life of a query, judged as a restart takes them: from the last offsets file,
with Spark's default for a conf that file lacks (:mod:`..pinned_conf`)."""
from __future__ import annotations

from typing import Iterator, NamedTuple

from wmcheck.checkpoint.logs.metadata_log import OFFSET_LOG

from ..conf_values import SPARK35_RESTORED, refusal
from ..model import PINNED_CONFS
from ..pinned_conf import PINNED, PinnedConf, Usage, effective, matters
from ..repartitions import SHUFFLE_PARTITIONS
from .context import Context
from .definition import ERROR, WARNING, Instruction, Issue, check
from .remedies import rewind_before
from .repartition import repartition_batches
from .text import listed, span

STORE_CONFS = frozenset({PINNED_CONFS["state_provider"], PINNED_CONFS["compression_codec"]})
"""The confs Spark takes as any string and first uses when a stateful operator opens its state store."""


class Drift(NamedTuple):
    """One pinned conf that differs between offsets files: ``error`` when the restart runs with another value than
    the query's (a conf its operators use), else a warning."""

    key: str
    error: bool
    issue: Issue


def usage(ctx: Context) -> Usage:
    """What the checkpoint shows of its query (operator names unknown when any operator's is)."""
    names = [op.name for op in ctx.operators]
    last = next((s for _, s in reversed(ctx.offsets.items()) if s.metadata is not None), None)
    key = PINNED_CONFS["state_provider"]
    provider = next((str(c[key]) for b, c in ctx.confs.items() if key in c), None)  # as the query started
    return Usage(frozenset(n for n in names if n) if names and all(names) else None, bool(ctx.operators), provider,
                 len(last.sources) if last is not None else 0)


def shown(value: str | None, recorded: bool) -> str:
    if value is None:
        return "not recorded"
    return repr(value) if recorded else f"not recorded ({value!r}, Spark's default then)"


def drifts(ctx: Context) -> list[Drift]:
    """Every pinned conf whose value differs between the offsets files with batch metadata, once per conf."""
    return ctx.once(_drifts)


def _drifts(ctx: Context) -> list[Drift]:
    batches = [(b, c) for b, c in ctx.confs.items() if ctx.offsets[b].metadata is not None]
    out: list[Drift] = []
    if batches:
        facts = usage(ctx)
        moved = repartition_batches(ctx)  # Spark's repartition changes the partition count on purpose (WM035 if unfinished)
        for conf in PINNED.values():
            if rejected(ctx, conf.key) is not None:
                continue  # WM057: Spark refuses the value the restart takes, whatever it was before
            rows = batches
            if conf.key == SHUFFLE_PARTITIONS and moved:
                rows = [(b, c) for b, c in batches if b >= max((m for m in moved if m <= batches[-1][0]), default=0)]
            drift = conf_drift(ctx, conf, rows, matters(conf, facts))
            if drift is not None:
                out.append(drift)
    return out


def conf_drift(ctx: Context, conf: PinnedConf, rows: list, used: bool) -> Drift | None:
    """How the conf's value in the last offsets file (what the restart runs with) relates to the earlier ones."""
    key = conf.key
    values = [(b, effective(c, key), key in c) for b, c in rows]
    known = [(b, v) for b, v, _ in values if v is not None]
    if not known:
        return None
    last, value, recorded = values[-1]
    first, original = known[0]
    unused = "" if used else (f"; but no operator of this checkpoint uses it ({operators_text(ctx)}), so Spark restarts "
                              f"correctly")
    if value is None:
        if not used:
            return None
        return Drift(key, False, Issue(OFFSET_LOG.path(last), (
            f"{key} is not recorded in offsets/{last}, the offsets file Spark restarts from, and Spark has no default "
            f"for it: the restart takes the session's value, while the query ran with {original!r} (batch {first}); "
            f"state written under one value and read under another fails or goes wrong"
        ), Instruction(f"restart the query with {key}={original}, or restore offsets/{last} from a backup")))
    if value != original:
        start = last
        for b, v, _ in reversed(values[:-1]):
            if v != value:
                break
            start = b
        text = (f"{key} is {shown(value, recorded)} at batch {span(start, last)} but {original!r} from batch {first}: "
                f"Spark pins it for the life of a query and restarts with the value of the last offsets file, "
                f"offsets/{last}")
        if not used:
            return Drift(key, False, Issue(OFFSET_LOG.path(start), text + unused, Instruction(
                f"nothing to change for a restart; restore offsets/{span(start, last)} from a backup if you have them")))
        spark35 = ("; Spark 3.5 does not restore it (Spark 4 does) and restarts correctly, its state written as "
                   "Spark 3.5 writes it" if key not in SPARK35_RESTORED and original == conf.legacy else "")
        return Drift(key, True, Issue(OFFSET_LOG.path(start), text + (
            f", so state written under one value is read under the other (a failed or wrong restart{spark35}); the logs come "
            f"from two runs or were edited (wmcheck undo restores them if a repair did it), and a rewind to before "
            f"batch {start} drops them"), rewind_before(ctx, start)))
    odd = [b for b, v in known if v != value]
    if not odd:
        return None
    other = {b: shown(v, r) for b, v, r in values if v is not None and v != value}
    return Drift(key, False, Issue(OFFSET_LOG.path(odd[0]), (
        f"{key} is {listed(sorted(set(other.values())))} at batch {listed([str(b) for b in odd])} "
        f"but {value!r} before and in offsets/{last}, the offsets file Spark restarts from: Spark reads no other "
        f"offsets file's conf, so the restart is correct, but a rewind to batch {odd[0]} would restart with the other "
        f"value; the logs come from two runs or were edited"
    ), Instruction(f"nothing to change for a restart; restore offsets/{odd[0]} from a backup before rewinding to it")))


def operators_text(ctx: Context) -> str:
    names = sorted({op.name for op in ctx.operators if op.name})
    return "operators: " + ", ".join(names) if names else "no stateful operator"


@check("WM015", ERROR, "pinned conf changes between batches")
def conf_changed(ctx: Context) -> Iterator[Issue]:
    yield from (d.issue for d in drifts(ctx) if d.error)


@check("WM044", WARNING, "pinned conf changes that do not decide the restart")
def conf_changed_harmlessly(ctx: Context) -> Iterator[Issue]:
    yield from (d.issue for d in drifts(ctx) if not d.error)


def last_conf(ctx: Context) -> tuple[int, dict] | None:
    """The last offsets file (the one Spark restarts from) and its pinned conf, when it parses with its metadata."""
    last = ctx.ckpt.offset_ids[-1] if ctx.ckpt.offset_ids else None
    if last is None or last not in ctx.confs or ctx.offsets[last].metadata is None:
        return None
    return last, dict(ctx.confs[last])


def rejected(ctx: Context, key: str) -> str | None:
    """Why Spark refuses the value of ``key`` in the last offsets file on restart; None when it takes it."""
    found = last_conf(ctx)
    if found is None:
        return None
    why = refusal(key, found[1], bool(ctx.operators))
    return None if why is None else why.reason


def before(value: object) -> str:
    return "no value (Spark's default then)" if value is None else repr(str(value))


@check("WM057", ERROR, "a pinned conf value Spark refuses on restart")
def conf_refused(ctx: Context) -> Iterator[Issue]:
    found = last_conf(ctx)
    if found is None:
        return
    last, conf = found
    for key in sorted(conf):
        why = rejected(ctx, key)
        if why is None:
            continue
        value = conf[key]
        start = last
        for batch in reversed([b for b in ctx.confs if b < last]):
            if refusal(key, ctx.confs[batch], bool(ctx.operators)) is None:
                break
            start = batch
        valid = max((b for b in ctx.confs if b < start), default=None)
        text = (f"offsets/{last}, the offsets file Spark restarts from, pins {key} = "
                f"{'null' if value is None else repr(str(value))}, which Spark 4.3 refuses ({why}): it sets every "
                "pinned conf from that file on restart and fails "
                + ("when the first stateful operator opens its state store" if key in STORE_CONFS and value is not None
                   else "at once ('requirement failed: value cannot be null for key', whether or not an operator uses the conf)"
                   if value is None else "at once ([INVALID_CONF_VALUE], whether or not an operator uses the conf)")
                + ("" if key in SPARK35_RESTORED else "; Spark 3.5 neither restores nor checks this conf (Spark 4 does) "
                   "and restarts regardless"))
        if valid is not None:
            yield Issue(OFFSET_LOG.path(start), text + (
                f"; batch {valid} pinned {before(ctx.confs[valid].get(key))}: the offsets files from batch {start} on "
                f"come from another run or were edited, and a rewind to before batch {start} drops them"),
                rewind_before(ctx, start))
        else:
            yield Issue(OFFSET_LOG.path(last), text + (
                "; every offsets file pins it, so the checkpoint was written by another Spark or distribution, or "
                "edited"), Instruction(
                f"restart it with the Spark that wrote it, or set {key} in every offsets file to the value the "
                f"query's state was written with, one Spark 4.3 accepts (offsets/{last} decides the restart, an older "
                "file a rewind to its batch)"))


