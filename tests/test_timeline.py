"""``wmcheck timeline``: the picture of a query, rendered for real (PNG, SVG text, HTML in headless Chromium)."""
from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from conftest import FIXTURES, fixture_checkpoint, fixture_facts, run_cli

STALL_LABEL = f"watermark stalled since batch 5: held by source 1 (file {fixture_facts('union_stall_min')['root']}/input/right)"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def draw(tmp_path, ext: str, *args: str) -> str:
    out = tmp_path / f"timeline{ext}"
    doc = json.loads(run_cli("timeline", fixture_checkpoint("union_stall_min"), "--output", out, "--format", "json", *args).stdout)
    assert doc == {"output": str(out), "batches": 11, "stall": STALL_LABEL}
    return str(out)


def test_png_is_a_real_picture(tmp_path):
    path = draw(tmp_path, ".png", "--progress", str(FIXTURES / "union_stall_min" / "eventlog"))
    data = open(path, "rb").read()
    assert png_size(data) == (1210, 770)  # 11 x 7 inches at 110 dpi (with progress: the late-rows panel)
    assert len(data) > 30_000


def test_svg_names_the_stall_and_the_lanes(tmp_path):
    text = open(draw(tmp_path, ".svg"), encoding="utf-8").read()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert STALL_LABEL in text
    assert "0 file …/input/left" in text and "1 file …/input/right" in text
    assert "late rows" not in text  # no progress, no late-rows panel




def chromium() -> str | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and not os.environ.get("CI"):
        pytest.skip("chromium is not installed (.ci/run installs it)")
    assert found, "chromium is missing in CI"
    return found


def test_html_renders_in_headless_chromium(tmp_path):
    from PIL import Image

    browser = chromium()
    page = draw(tmp_path, ".html", "--progress", str(FIXTURES / "union_stall_min" / "progress.jsonl"))
    html = open(page, encoding="utf-8").read()
    assert "<script src" not in html and "<link" not in html and "@import" not in html
    assert re.findall(r"url\((?!#)", html) == []
    assert re.findall(r'(?:src|href)="(?!#)', html) == []  # nothing loaded from elsewhere (offline)
    shot = tmp_path / "shot.png"
    subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1300,1000",
                    "--hide-scrollbars", f"--screenshot={shot}", f"file://{page}"],
                   check=True, capture_output=True, timeout=120)
    image = Image.open(shot).convert("RGB")
    assert image.size == (1300, 1000)
    colors = image.getcolors(maxcolors=1 << 20)
    white = max(colors)[0]
    painted = image.width * image.height - white
    assert painted > 40_000, painted  # the chart, not a blank page
    assert len(colors) > 50
    lanes = sum(n for n, (r, g, b) in colors if r < 60 and g > 160 and b > 180)
    shaded = sum(n for n, (r, g, b) in colors if r > 240 and 200 < g < 240 and 200 < b < 240)
    assert lanes > 5_000 and shaded > 20_000, (lanes, shaded)  # the per-source lanes (cyan) and the stall (shaded red)


def test_python_api_returns_the_figure():
    from matplotlib.figure import Figure

    from wmcheck.checkpoint.model import open_checkpoint
    from wmcheck.checkpoint.watermarks.timeline import figure, timeline

    tl = timeline(open_checkpoint(str(fixture_checkpoint("union_stall_max"))))
    fig = figure(tl)
    assert isinstance(fig, Figure) and tl.stall is None
    assert [b.batch for b in tl.batches if not b.data_batch] == [3, 11]
    assert [b.sources_with_data for b in tl.batches][4:6] == [("0", "1"), ("0",)]


def test_unknown_extension_is_one_line(tmp_path):
    out = run_cli("timeline", fixture_checkpoint("union_stall_min"), "--output", tmp_path / "t.pdf", exit_code=2).output
    assert out.strip() == (f"Error: cannot write a timeline to {tmp_path}/t.pdf: unknown extension .pdf "
                           "(hint: name the output file .html, .png or .svg)")


def test_show_and_help_import_no_plotting_library():
    code = ("import sys; from wmcheck.cli.main import cli\n"
            f"for args in (['--help'], ['show', {str(fixture_checkpoint('union_stall_min'))!r}]):\n"
            "    try:\n        cli(args)\n    except SystemExit:\n        pass\n"
            "print(sorted(m for m in ('matplotlib', 'PIL', 'numpy', 'pyspark') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_time_axes_are_ticked_by_their_span():
    """Batches seconds apart: no time label twice (the batch-time axis repeated 'MM-DD HH:MM'), precise to the
    span; the day, when all ticks share it, once in the axis label."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from wmcheck.checkpoint.model import open_checkpoint
    from wmcheck.checkpoint.watermarks.timeline import figure, timeline

    for name in ("union_stall_min", "agg_window_hdfs"):
        fig = figure(timeline(open_checkpoint(str(fixture_checkpoint(name)))))
        FigureCanvasAgg(fig).draw()
        event, clock = fig.axes[0], fig.axes[-1]
        for axis in (event.yaxis, clock.yaxis):
            labels = [t.get_text() for t in axis.get_ticklabels() if t.get_text()]
            assert len(labels) >= 3 and len(set(labels)) == len(labels), (name, labels)
        assert all(re.fullmatch(r"\d\d:\d\d:\d\d", t.get_text()) for t in clock.yaxis.get_ticklabels()), name
        stamp = json.loads((fixture_checkpoint(name) / "offsets" / "0").read_text().split("\n")[1])["batchTimestampMs"]
        day = datetime.fromtimestamp(stamp / 1000, timezone.utc).strftime("%Y-%m-%d")
        assert clock.get_ylabel() == f"batch time ({day}, UTC)"
    assert event.get_ylabel() == "event time (2024-01-01, UTC)"  # agg_window_hdfs: every tick on that day
    assert [t.get_text() for t in event.yaxis.get_ticklabels()][:2] == ["00:00:00", "00:00:10"]


def test_the_title_names_the_query_and_the_checkpoint(tmp_path):
    ckpt = fixture_checkpoint("union_stall_min")
    query = json.loads((ckpt / "metadata").read_text())["id"]
    text = open(draw(tmp_path, ".svg"), encoding="utf-8").read()
    assert f"wmcheck timeline: query {query}: {ckpt}" in text


def test_html_says_the_title_and_the_stall_once_and_shows_a_batch_on_hover(tmp_path):
    """Hovering batch 5 (the page's link #batch=5 hovers it, with a real mouseover event on its region) shows its
    watermark, batch time, sources' offsets, rows and late rows; read back from headless Chromium's DOM."""
    browser = chromium()
    ckpt = fixture_checkpoint("union_stall_min")
    page = draw(tmp_path, ".html", "--progress", str(FIXTURES / "union_stall_min" / "progress.jsonl"))
    html = open(page, encoding="utf-8").read()
    explanation = json.loads(run_cli("show", ckpt, "--format", "json").stdout)["watermark_stall"]["explanation"]
    assert html.count(f"query {json.loads((ckpt / 'metadata').read_text())['id']}: {ckpt}") == 2  # <title> and <h1>
    assert html.count(explanation.split(":")[0]) == 1 and STALL_LABEL not in html
    done = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                           f"file://{page}#batch=5"], check=True, capture_output=True, text=True, timeout=120)
    tip = re.search(r'<div id="tip" data-batch="5"[^>]*>(.*?)</div></div>', done.stdout)
    assert tip, done.stdout[-2000:]
    lines = re.findall(r"<div>(?:<b>)?(.*?)</div>", tip[1].replace("</b>", "") + "</div>")
    assert re.search(r'<div class="head">batch 5 \(data\)</div>', tip[1])
    assert lines[1:] == ["watermark: 2024-01-01T00:00:08.000Z", "max event time (progress): 2024-01-01T00:00:30.000Z",
                         "source 0 file …/input/left: file log batch 4 (new data)",
                         "source 1 file …/input/right: file log batch 3 (no new data)", "input rows: 2", "late rows: 0"]
    assert lines[0].startswith("batch time: ") and 'class="hovered"' in done.stdout


def test_a_home_where_matplotlib_cannot_keep_its_cache_prints_nothing_about_it(tmp_path):
    """HOME below a regular file (no ~/.config nor ~/.cache can be made, as for a user without a home): the picture
    is written with nothing on stderr (matplotlib told to use a directory of this user's), a second run alike."""
    (tmp_path / "file").write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")}
    env["HOME"] = str(tmp_path / "file" / "home")
    for run in (1, 2):
        out = tmp_path / f"t{run}.png"
        done = subprocess.run([sys.executable, "-m", "wmcheck.cli", "timeline", str(fixture_checkpoint("agg_window_hdfs")),
                               "--output", str(out)], capture_output=True, text=True, env=env, timeout=120)
        assert (done.returncode, done.stdout.splitlines()[0]) == (0, f"wrote:   {out}")
        assert "matplotlib" not in done.stderr.lower() and "MPLCONFIGDIR" not in done.stderr, done.stderr
    assert done.stderr == ""
