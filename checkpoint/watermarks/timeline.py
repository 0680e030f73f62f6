"""``wmcheck timeline``: a query over its batches in one picture.

:func:`timeline` gathers the facts (pure data, no plotting library); :func:`figure` draws them with
matplotlib (imported here only, so ``show`` and ``--help`` stay fast) and returns the figure for
notebooks; :func:`save` writes ``.png``, ``.svg`` or a self-contained, interactive ``.html`` (the SVG inline,
each batch's details on hover).
"""
from __future__ import annotations

import html
import io
import json
import posixpath
from datetime import datetime, timezone, tzinfo
from typing import TYPE_CHECKING, Any, Mapping

from wmcheck.checkpoint.errors import CheckpointError, Spelling, UnsupportedError, arg, python_spelling, spelled
from wmcheck.checkpoint.logs.source_offsets import SourceOffset
from wmcheck.checkpoint.model import Checkpoint
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.repartitions import repartitions
from wmcheck.checkpoint.source_labels import SourceLabel, source_labels
from wmcheck.checkpoint.timeutil import format_ms
from wmcheck.checkpoint.watermarks.operators import operator_watermarks
from wmcheck.checkpoint.watermarks.progress import QueryProgress
from wmcheck.checkpoint.watermarks.stall import WatermarkStall, batch_activity, watermark_stall

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FORMATS = (".html", ".png", ".svg")


@dataclass(frozen=True)
class TimelineBatch:
    """One batch: its times, which sources brought data and where each ended, and (with progress) event time and
    late rows."""

    batch: int
    timestamp_ms: int | None
    watermark_ms: int
    data_batch: bool
    sources_with_data: tuple[str, ...]
    repartition: bool
    input_rows: int | None
    event_time_max_ms: int | None
    late_rows: int | None
    offsets: tuple[str, ...] = ()
    """Each source's end offset, as ``SourceOffset.summary`` says it (in the order of ``Timeline.sources``)."""


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
    operators: tuple["OperatorLine", ...] = ()
    """With several stateful operators, each one's own eviction watermark per batch (Spark 3.5+)."""

    @property
    def title(self) -> str:
        """What the picture is of: the query and where its checkpoint is."""
        return f"query {self.query_id or '(no metadata)'}: {self.location}"


@dataclass(frozen=True)
class Line:
    """One line on the event-time panel, drawn and listed in each batch's details: a label, a value per batch
    (ms; None: none that batch) and how it is drawn. More lines (one per stateful operator's watermark) are more
    entries of :func:`event_time_lines`."""

    label: str
    values: tuple[int | None, ...]
    """One per ``Timeline.batches``."""
    style: Mapping[str, Any]
    """matplotlib keywords (``color``, ``linewidth``, ``marker``, ``linestyle``...)."""
    step: bool = False
    """A step function (the watermark holds from a batch to the next), else points joined as given."""


@dataclass(frozen=True)
class OperatorLine:
    """One stateful operator's own eviction watermark in every batch (None: unknown), and where it parts from the
    global watermark."""

    operator_id: int
    label: str
    values: tuple[int | None, ...]
    """One per ``Timeline.batches``."""
    parts_at: int | None
    """The first batch whose value differs from the global watermark (None: it never does)."""
    stuck_at_zero: bool
    """0 wherever the global watermark has moved: the operator never evicts."""


OPERATOR_COLORS = ("tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:gray")


def operator_lines(ckpt: Checkpoint, batches: tuple[TimelineBatch, ...], progress: QueryProgress | None) -> tuple[OperatorLine, ...]:
    """Each stateful operator's eviction watermark per batch, when the query has several (else none to tell apart)."""
    if len(ckpt.operators) < 2:
        return ()
    model = operator_watermarks(ckpt, progress, [b.batch for b in batches])
    out = []
    for link in model.operators:
        values = []
        for b in batches:
            found = model.of(b.batch, link.operator_id)
            values.append(found.evict_ms if found else None)
        parts = next((b.batch for b, v in zip(batches, values) if v is not None and v != b.watermark_ms), None)
        moved = [v for b, v in zip(batches, values) if b.watermark_ms > 0]
        label = f"operator {link.operator_id} ({link.name or link.node or '?'})"
        out.append(OperatorLine(link.operator_id, label, tuple(values), parts,
                                bool(moved) and all(v == 0 for v in moved)))
    return tuple(out)


def event_time_lines(tl: Timeline) -> list[Line]:
    """The event-time panel's lines: the global watermark each batch ran with, each stateful operator's own eviction
    watermark (several operators) and, from progress, max event time."""
    lines = [Line("watermark", tuple(b.watermark_ms or None for b in tl.batches),
                  {"color": "tab:blue", "linewidth": 2}, step=True)]
    for i, op in enumerate(tl.operators):
        label = f"{op.label} eviction watermark" + (": 0, never evicts" if op.stuck_at_zero else "")
        lines.append(Line(label, tuple(v or None for v in op.values),
                          {"color": OPERATOR_COLORS[i % len(OPERATOR_COLORS)], "linewidth": 1.3, "linestyle": "--"},
                          step=True))
    if any(b.event_time_max_ms is not None for b in tl.batches):
        lines.append(Line("max event time (progress)", tuple(b.event_time_max_ms for b in tl.batches),
                          {"color": "tab:green", "marker": "o", "markersize": 5, "linestyle": "none"}))
    return lines


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
            tuple(SourceOffset(s.source_id, s.offset).summary() for s in act.sources),
        ))
    meta = ckpt.query_metadata
    return Timeline(meta.query_id if meta else None, ckpt.location, tuple(out), tuple(labels.values()),
                    watermark_stall(ckpt, progress, tz), progress is not None, unreadable,
                    operator_lines(ckpt, tuple(out), progress))


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


def figure(tl: Timeline, tz: tzinfo = timezone.utc, titled: bool = True) -> "Figure":
    """The picture: the event-time lines (:func:`event_time_lines`) and batch time; per-source lanes; late rows
    (with progress). Time axes are ticked for the span they cover. ``titled``: the query, its location and the
    stall drawn in the picture (an HTML page says them as text instead). Every batch is a hover region
    (SVG id ``batch-N-K``, one per panel K) for the HTML page."""
    from matplotlib.figure import Figure

    batches = [b.batch for b in tl.batches]
    rows = [3.2, 0.45 * max(len(tl.sources), 1) + 0.4] + ([1.3] if tl.with_progress else [])
    fig = Figure(figsize=(11, sum(rows) + 1.2), layout="constrained")
    axes = fig.subplots(len(rows), 1, sharex=True, gridspec_kw={"height_ratios": rows})
    times, lanes = axes[0], axes[1]
    if titled:
        fig.suptitle(f"wmcheck timeline: {tl.title}", fontsize=10)
    for line in event_time_lines(tl):
        points = [(b, _date(v, tz)) for b, v in zip(batches, line.values) if v is not None]
        if points:
            xs, ys = [x for x, _ in points], [y for _, y in points]
            (times.step(xs, ys, where="post", label=line.label, **line.style) if line.step
             else times.plot(xs, ys, label=line.label, **line.style))
        elif line.label.endswith("never evicts"):  # an operator whose watermark stays 0: in the legend, off the chart
            times.plot([], [], label=line.label, **line.style)
    parting: dict[int, list[str]] = {}  # where an operator's own watermark parts from the global one
    for op in tl.operators:
        if op.parts_at is not None:
            parting.setdefault(op.parts_at, []).append(f"{op.operator_id}" + (" (0)" if op.stuck_at_zero else ""))
    for at, names in parting.items():
        times.axvline(at, color="0.5", linestyle=":", linewidth=1)
        times.annotate(f"operator{'s' if len(names) > 1 else ''} {', '.join(names)} part{'' if len(names) > 1 else 's'}",
                       (at, 0.02), xycoords=("data", "axes fraction"), fontsize=7, color="0.3", rotation=90, va="bottom",
                       ha="right")
    _time_axis(times, "y", "event time", tz)
    clock = times.twinx()
    stamped = [(b.batch, _date(b.timestamp_ms, tz)) for b in tl.batches if b.timestamp_ms]
    if stamped:
        clock.plot([x for x, _ in stamped], [y for _, y in stamped], "--", color="tab:orange", linewidth=1, label="batch time")
    _time_axis(clock, "y", "batch time", tz)
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
        if titled:
            times.set_title(label, color="darkred", fontsize=9, loc="left")
    for k, ax in enumerate([clock, *axes[1:]]):  # on top of each panel (the twin axes lie over the first)
        for n in batches:
            ax.axvspan(n - 0.5, n + 0.5, facecolor="white", alpha=0.0, zorder=10, gid=f"batch-{n}-{k}")
    return fig


DAY_S = 86_400


def _time_axis(ax: Any, which: str, label: str, tz: tzinfo) -> None:
    """Ticks chosen for the span the axis covers, labelled as precisely as their spacing needs (``12:00`` for
    minutes apart, ``12:00:05`` for seconds, dates for days), the day in front when the span crosses one, so that
    no label repeats; the day, when every tick shares it, once in the axis label."""
    from matplotlib import dates, ticker

    axis = ax.yaxis if which == "y" else ax.xaxis
    axis.set_major_locator(dates.AutoDateLocator(tz=tz))

    def text(value: float, _pos: int | None = None) -> str:
        locs = _ticks(axis) or [value]
        step_s = min((b - a for a, b in zip(locs, locs[1:])), default=1.0) * DAY_S
        days = "" if _one_day(locs, tz) else "%m-%d "
        when = dates.num2date(value, tz)
        if step_s >= DAY_S:
            return when.strftime("%Y-%m-%d")
        if step_s >= 60:
            return when.strftime(days + "%H:%M")
        if step_s >= 1:
            return when.strftime(days + "%H:%M:%S")
        return when.strftime(days + "%H:%M:%S.%f")[:-3]

    axis.set_major_formatter(ticker.FuncFormatter(text))
    ax.callbacks.connect(f"{which}lim_changed", lambda _ax: _label_day(ax, which, label, tz))
    _label_day(ax, which, label, tz)


def _ticks(axis: Any) -> list[float]:
    low, high = sorted(axis.get_view_interval())
    return [t for t in axis.get_major_locator()() if low <= t <= high]


def _one_day(values: list[float], tz: tzinfo) -> bool:
    from matplotlib import dates

    return len({dates.num2date(v, tz).date() for v in values}) <= 1


def _label_day(ax: Any, which: str, label: str, tz: tzinfo) -> None:
    """``label``, with the day every tick of the axis shares (when they do)."""
    from matplotlib import dates

    ticks = _ticks(ax.yaxis if which == "y" else ax.xaxis)
    day = ""
    if ticks and _one_day(ticks, tz):
        first = dates.num2date(ticks[0], tz)
        day = f" ({first.strftime('%Y-%m-%d')}, {first.tzname() or tz})"
    (ax.set_ylabel if which == "y" else ax.set_xlabel)(label + day)


def svg_text(fig: "Figure") -> str:
    """The figure as SVG with its text kept as text (searchable, selectable)."""
    from matplotlib import rc_context

    buf = io.StringIO()
    with rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def batch_details(tl: Timeline, tz: tzinfo = timezone.utc) -> dict[str, dict[str, Any]]:
    """What hovering a batch shows, by batch id: its kind and time, every event-time line's value, each source's
    offset and whether it brought data, and (with progress) its input and late rows."""
    lines = event_time_lines(tl)
    out = {}
    for i, b in enumerate(tl.batches):
        kind = "repartition" if b.repartition else "data" if b.data_batch else "no-data"
        out[str(b.batch)] = {
            "batch": b.batch, "kind": kind, "batch time": format_ms(b.timestamp_ms, tz),
            "lines": [[line.label, format_ms(line.values[i], tz) if line.values[i] is not None else "none"] for line in lines],
            "sources": [[src.short, offset, "new data" if src.source_id in b.sources_with_data else "no new data"]
                        for src, offset in zip(tl.sources, b.offsets)],
            "input rows": b.input_rows, "late rows": b.late_rows,
        }
    return out


_SCRIPT = """
const details = JSON.parse(document.getElementById("batches").textContent);
const tip = document.getElementById("tip");
function row(parent, label, value) {
  const line = document.createElement("div");
  const name = document.createElement("b");
  name.textContent = label + ": ";
  line.append(name, String(value));
  parent.append(line);
}
function show(batch, x, y, region) {
  const d = details[batch];
  if (!d) return;
  tip.replaceChildren();
  const head = document.createElement("div");
  head.className = "head";
  head.textContent = "batch " + d.batch + " (" + d.kind + ")";
  tip.append(head);
  row(tip, "batch time", d["batch time"] || "none");
  for (const [label, value] of d.lines) row(tip, label, value);
  for (const [source, offset, brought] of d.sources) row(tip, "source " + source, offset + " (" + brought + ")");
  if (d["input rows"] !== null) row(tip, "input rows", d["input rows"]);
  if (d["late rows"] !== null) row(tip, "late rows", d["late rows"]);
  tip.dataset.batch = d.batch;
  tip.hidden = false;
  tip.style.left = Math.min(x + 14, window.scrollX + document.documentElement.clientWidth - tip.offsetWidth - 8) + "px";
  tip.style.top = (y + 14) + "px";
  document.querySelectorAll(".hovered").forEach(e => e.classList.remove("hovered"));
  document.querySelectorAll('[id^="batch-' + batch + '-"]').forEach(e => e.classList.add("hovered"));
}
document.querySelectorAll('g[id^="batch-"]').forEach(region => {
  const batch = region.id.split("-")[1];
  region.addEventListener("mouseover", e => show(batch, e.pageX, e.pageY, region));
  region.addEventListener("mouseout", () => { tip.hidden = true; region.classList.remove("hovered"); });
});
const linked = location.hash.match(/^#batch=(\\d+)$/);  // page.html#batch=7: that batch's details, as hovering shows them
if (linked) {
  const region = document.getElementById("batch-" + linked[1] + "-0");
  if (region) {
    const box = region.getBoundingClientRect();
    region.dispatchEvent(new MouseEvent("mouseover", {bubbles: true, clientX: box.left + box.width / 2,
                                                      clientY: box.top + box.height / 2}));
  }
}
"""


def html_page(tl: Timeline, spelling: Spelling = python_spelling, tz: tzinfo = timezone.utc) -> str:
    """A self-contained page: the title and the stall explained (parameters named by ``spelling``) as text, once;
    the picture inline (SVG, without them); hovering a batch (or ``page.html#batch=N``) shows its details
    (:func:`batch_details`). Nothing is loaded from elsewhere."""
    svg = svg_text(figure(tl, tz, titled=False))
    svg = svg[svg.index("<svg"):]
    note = f"<p class=\"stall\">{html.escape(spelled(tl.stall.explanation, spelling))}</p>" if tl.stall else ""
    data = json.dumps(batch_details(tl, tz), ensure_ascii=False).replace("</", "<\\/")
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(tl.title)}</title>"
            "<style>body{font-family:sans-serif;margin:1em;background:#fff;color:#222}svg{max-width:100%;height:auto}"
            ".stall{color:#8b0000}#tip{position:absolute;background:#fffffa;border:1px solid #888;padding:.4em .6em;"
            "font-size:.85em;box-shadow:2px 2px 6px #0003;pointer-events:none;max-width:40em}#tip .head{font-weight:bold;"
            "margin-bottom:.2em}g[id^=batch-] path{pointer-events:all}g.hovered path{fill:#4477aa !important;opacity:.15 !important}"
            "</style></head>\n"
            f"<body><h1 style=\"font-size:1.1em\">wmcheck timeline: {html.escape(tl.title)}</h1>{note}\n{svg}"
            "<div id=\"tip\" hidden></div>\n"
            f"<script type=\"application/json\" id=\"batches\">{data}</script>\n<script>{_SCRIPT}</script></body></html>\n")


def save(tl: Timeline, fig: "Figure", path: str, spelling: Spelling = python_spelling, tz: tzinfo = timezone.utc) -> None:
    """Write the picture to ``path``: ``.png`` or ``.svg`` of ``fig``, or a self-contained, interactive ``.html``
    (:func:`html_page`: parameters named by ``spelling``, times in ``tz``)."""
    ext = posixpath.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise UnsupportedError(f"cannot write a timeline to {path}: unknown extension {ext or '(none)'}",
                               hint="name the output file .html, .png or .svg", param="output")
    try:
        if ext == ".png":
            fig.savefig(path, format="png", dpi=110)
            return
        text = svg_text(fig) if ext == ".svg" else html_page(tl, spelling, tz)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise CheckpointError(f"cannot write the timeline to {path}: {exc.strerror or exc}",
                              hint=f"{arg('output')} names a file in a directory that exists and is writable",
                              param="output") from None
