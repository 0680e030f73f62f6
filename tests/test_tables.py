"""Tables as people read them: times in --tz, durations never negative, text wrapped to the terminal (full with
--wide), "unknown" instead of blanks; JSON and CSV keep epoch milliseconds and the full text."""
from __future__ import annotations

import json

from conftest import fixture_checkpoint, run_cli

CKPT = str(fixture_checkpoint("agg_window_hdfs"))


def _table(text: str, title: str) -> list[str]:
    """The lines of the table titled ``title`` in a command's table output."""
    lines = text.split("\n")
    start = lines.index(title) + 1
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    return lines[start:end]


def test_state_eviction_table_shows_the_watermark_as_a_time_in_tz_and_json_csv_keep_epoch_ms():
    out = run_cli("state", CKPT, "--tz", "Europe/Paris").stdout
    assert _table(out, "Eviction") == [
        "operator_id    store    watermark                      watermark from    rule",
        "-------------  -------  -----------------------------  ----------------  "
        "------------------------------------------------------------------------",
        "0              default  2024-01-01T01:01:25.000+01:00  next batch        "
        "removed once key.window.end <= watermark (never in complete output mode)",
    ]
    store = json.loads(run_cli("state", CKPT, "--format", "json").stdout)["stores"][0]
    assert (store["watermark_ms"], store["watermark_from"]) == (1704067285000, "next batch")
    csv = run_cli("state", CKPT, "--format", "csv", "--tz", "Europe/Paris").stdout.split("\n")
    assert "stores.0.watermark_ms,1704067285000" in csv
