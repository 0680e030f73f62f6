"""``wmcheck timeline``: a query over its batches in one picture.

:func:`timeline` gathers the facts (pure data, no plotting library); :func:`figure` draws them with
matplotlib (imported here only, so ``show`` and ``--help`` stay fast) and returns the figure for
notebooks; :func:`save` writes ``.png``, ``.svg`` or a self-contained ``.html`` (the SVG inline).
"""
from __future__ import annotations

import html
import io
import posixpath
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from typing import TYPE_CHECKING

from .errors import CheckpointError, Spelling, UnsupportedError, arg, python_spelling, spelled
from .model import Checkpoint
from .progress import QueryProgress
from .repartitions import repartitions
from .source_labels import SourceLabel, source_labels
from .stall import WatermarkStall, batch_activity, watermark_stall

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FORMATS = (".html", ".png", ".svg")


@dataclass(frozen=True)
class TimelineBatch:
    """One batch: its times, which sources brought data, and (with progress) event time and late rows."""

    batch: int
    timestamp_ms: int | None
    watermark_ms: int
    data_batch: bool
    sources_with_data: tuple[str, ...]
    repartition: bool
    input_rows: int | None
    event_time_max_ms: int | None
    late_rows: int | None


@dataclass(frozen=True)
class Timeline:
    """Everything the picture shows."""

    query_id: str | None
    location: str
    batches: tuple[TimelineBatch, ...]
    sources: tuple[SourceLabel, ...]
    stall: WatermarkStall | None
    with_progress: bool
    unreadable: tuple[int, ...] = ()
    """Batches whose offsets files do not parse (left out of the picture)."""


def timeline(ckpt: Checkpoint, progress: QueryProgress | None = None, tz: tzinfo = timezone.utc) -> Timeline:
    """The facts of every batch with an offsets file (repartition batches as :mod:`.repartitions` finds them)."""
    ids = ckpt.offset_ids
    ckpt.load_batches(ids)
    moved = {r.batch for r in repartitions(ckpt)}
    labels = source_labels(ckpt)
    out = []
    unreadable = tuple(b for b in ids if ckpt.offsets_failure(b) is not None)
    for batch in ids:
        if batch in unreadable:
            continue
        act = batch_activity(ckpt, batch, progress, labels=labels)
        report = progress.get(batch) if progress else None
        out.append(TimelineBatch(
            batch, act.timestamp_ms, act.watermark_ms, act.data_batch, act.with_data, batch in moved,
            report.num_input_rows if report else None, report.event_time_max_ms if report else None,
            report.rows_dropped_by_watermark if report else None,
        ))
    meta = ckpt.query_metadata
    return Timeline(meta.query_id if meta else None, ckpt.location, tuple(out), tuple(labels.values()),
                    watermark_stall(ckpt, progress, tz), progress is not None, unreadable)


def _date(ms: int, tz: tzinfo) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz)


def stall_label(tl: Timeline) -> str | None:
    """The text the stall is labelled with in the picture."""
    stall = tl.stall
    if stall is None:
        return None
    names = {s.source_id: s.text for s in tl.sources}
    if stall.held_by:
        return f"watermark stalled since batch {stall.since_batch}: held by source {', '.join(names.get(s, s) for s in stall.held_by)}"
    if stall.reason == "no_input":
        return f"no new input since batch {stall.since_batch}"
    return f"watermark stalled since batch {stall.since_batch}: max event time not advancing"


def figure(tl: Timeline, tz: tzinfo = timezone.utc) -> "Figure":
    """The picture: watermark, batch time and max event time; per-source lanes; late rows (with progress)."""
    from matplotlib import dates
    from matplotlib.figure import Figure

    batches = [b.batch for b in tl.batches]
    rows = [3.2, 0.45 * max(len(tl.sources), 1) + 0.4] + ([1.3] if tl.with_progress else [])
    fig = Figure(figsize=(11, sum(rows) + 1.2), layout="constrained")
    axes = fig.subplots(len(rows), 1, sharex=True, gridspec_kw={"height_ratios": rows})
    times, lanes = axes[0], axes[1]
    title = f"wmcheck timeline: {posixpath.basename(tl.location.rstrip('/'))}" + (f" (query {tl.query_id})" if tl.query_id else "")
    fig.suptitle(title, fontsize=11)
    wm = [(b.batch, _date(b.watermark_ms, tz)) for b in tl.batches if b.watermark_ms]
    if wm:
        times.step([x for x, _ in wm], [y for _, y in wm], where="post", color="tab:blue", linewidth=2, label="watermark")
    event = [(b.batch, _date(b.event_time_max_ms, tz)) for b in tl.batches if b.event_time_max_ms is not None]
    if event:
        times.plot([x for x, _ in event], [y for _, y in event], "o", color="tab:green", markersize=5, label="max event time (progress)")
    times.set_ylabel("event time")
    times.yaxis.set_major_formatter(dates.DateFormatter("%m-%d %H:%M:%S", tz=tz))
    clock = times.twinx()
    stamped = [(b.batch, _date(b.timestamp_ms, tz)) for b in tl.batches if b.timestamp_ms]
    if stamped:
        clock.plot([x for x, _ in stamped], [y for _, y in stamped], "--", color="tab:orange", linewidth=1, label="batch time")
    clock.set_ylabel("batch time")
    clock.yaxis.set_major_formatter(dates.DateFormatter("%m-%d %H:%M", tz=tz))
    for b in tl.batches:
        if not b.data_batch:
            for ax in axes:
                ax.axvline(b.batch, color="0.8", linewidth=1, zorder=0)
        if b.repartition:
            for ax in axes:
                ax.axvline(b.batch, color="tab:purple", linestyle=":", linewidth=1.5)
            times.annotate("repartition", (b.batch, 1), xycoords=("data", "axes fraction"), color="tab:purple",
                           fontsize=8, rotation=90, va="top", ha="right")
    handles = times.get_legend_handles_labels()[0] + clock.get_legend_handles_labels()[0]
    handles.append(times.axvline(batches[0] if batches else 0, color="0.8", linewidth=1, zorder=0, label="no-data batch"))
    times.legend(handles=handles, loc="upper left", fontsize=8)
    for i, src in enumerate(tl.sources):
        got = [b.batch for b in tl.batches if src.source_id in b.sources_with_data]
        lanes.broken_barh([(x - 0.4, 0.8) for x in got], (i - 0.3, 0.6), color="tab:cyan")
    lanes.set_yticks(range(len(tl.sources)), [s.short for s in tl.sources], fontsize=8)
    lanes.set_ylim(-0.6, max(len(tl.sources), 1) - 0.4)
    lanes.invert_yaxis()
    lanes.set_ylabel("new data")
    if tl.with_progress:
        late = axes[2]
        late.bar(batches, [b.late_rows or 0 for b in tl.batches], color="tab:red", width=0.6)
        late.set_ylabel("late rows")
        late.set_ylim(bottom=0, top=max([b.late_rows or 0 for b in tl.batches] + [1]) * 1.15)
        late.yaxis.get_major_locator().set_params(integer=True)
    axes[-1].set_xlabel("batch")
    axes[-1].xaxis.get_major_locator().set_params(integer=True)
    label = stall_label(tl)
    if label and tl.stall is not None and batches:
        for ax in axes:
            ax.axvspan(tl.stall.since_batch - 0.5, batches[-1] + 0.5, color="tab:red", alpha=0.12, zorder=0)
        times.set_title(label, color="darkred", fontsize=9, loc="left")
    return fig


def svg_text(fig: "Figure") -> str:
    """The figure as SVG with its text kept as text (searchable, selectable)."""
    from matplotlib import rc_context

    buf = io.StringIO()
    with rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def html_page(tl: Timeline, fig: "Figure", spelling: Spelling = python_spelling) -> str:
    """A self-contained page: the SVG inline, the stall explained (parameters named by ``spelling``); nothing
    loaded from elsewhere."""
    svg = svg_text(fig)
    svg = svg[svg.index("<svg"):]
    note = f"<p class=\"stall\">{html.escape(spelled(tl.stall.explanation, spelling))}</p>" if tl.stall else ""
    title = html.escape(f"wmcheck timeline: {tl.location}")
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>"
            "<style>body{font-family:sans-serif;margin:1em;background:#fff;color:#222}svg{max-width:100%;height:auto}"
            ".stall{color:#8b0000}</style></head>\n"
            f"<body><h1 style=\"font-size:1.1em\">{title}</h1>{note}\n{svg}</body></html>\n")


def save(tl: Timeline, fig: "Figure", path: str, spelling: Spelling = python_spelling) -> None:
    """Write the picture to ``path``: ``.html`` (self-contained, parameters named by ``spelling``), ``.png`` or
    ``.svg``."""
    ext = posixpath.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise UnsupportedError(f"cannot write a timeline to {path}: unknown extension {ext or '(none)'}",
                               hint="name the output file .html, .png or .svg")
    try:
        if ext == ".png":
            fig.savefig(path, format="png", dpi=110)
            return
        text = svg_text(fig) if ext == ".svg" else html_page(tl, fig, spelling)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise CheckpointError(f"cannot write the timeline to {path}: {exc.strerror or exc}",
                              hint=f"{arg('output')} names a file in a directory that exists and is writable",
                              param="output") from None
