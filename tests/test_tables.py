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


def test_state_stores_table_says_ahead_never_a_negative_duration_behind_the_watermark():
    out = run_cli("state", CKPT).stdout
    assert _table(out, "Stores")[2].split("  ")[-1].strip() == "ahead by 5s"
    assert _table(out, "Stores")[2] == (
        "0              stateStoreSave  default  4       0:1 1:0 2:3      key.window.end       0                       "
        "2024-01-01T00:01:30.000Z  ahead by 5s")
    store = json.loads(run_cli("state", CKPT, "--format", "json").stdout)["stores"][0]
    assert store["oldest_behind_watermark_ms"] == -5000  # JSON: signed milliseconds


def test_state_stores_never_evicted_say_so_and_none_instead_of_blanks():
    out = run_cli("state", str(fixture_checkpoint("avro_tws"))).stdout
    rows = [" ".join(line.split()) for line in _table(out, "Stores")[2:]]
    assert rows == [
        "0 transformWithStateInPandasExec count 2 0:1 1:1 none: never evicted never evicted none none",
        "0 transformWithStateInPandasExec $eventTimers_keyToTimestamp 2 0:1 1:1 expiration_timestamp_ms 0 "
        "2024-01-01T00:01:12.000Z ahead by 2s",
        "0 transformWithStateInPandasExec events 3 0:2 1:1 none: never evicted never evicted none none",
        "0 transformWithStateInPandasExec last_by_v 2 0:1 1:1 none: never evicted never evicted none none",
    ]


def test_a_table_leaves_out_columns_without_a_value_and_says_unknown_for_a_missing_one():
    import io

    from wmcheck.cli.output import make_output

    shown = io.StringIO()
    make_output("table", shown).rows([{"a": 1, "b": None, "c": None, "d": []}, {"a": 2, "b": "x", "c": "", "d": [1]}])
    assert shown.getvalue() == ("a    b        d\n"
                                "---  -------  ----\n"
                                "1    unknown  none\n"
                                "2    x        1\n")
    csv = io.StringIO()
    make_output("csv", csv).rows([{"a": 1, "b": None, "c": None}])
    assert csv.getvalue() == "a,b,c\n1,,\n"  # CSV keeps every column, blanks for nulls
    plan = run_cli("replay", CKPT, "--from", "12", "--plan").stdout
    assert _table(plan, "Batches")[0].split() == ["batch", "committed", "watermark", "late", "watermark", "source",
                                                  "kind", "input", "files", "bytes", "missing"]  # no empty note column
    (batch,) = json.loads(run_cli("replay", CKPT, "--from", "12", "--plan", "--format", "json").stdout)["batches"]
    assert batch["sources"][0]["note"] is None


def test_long_text_wraps_to_the_terminal_and_wide_keeps_it_whole(monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    shown = run_cli("show", CKPT).stdout
    how = _table(shown, "Operator watermarks (batch 13)")
    assert max(map(len, how)) <= 120 and len(how) == 12  # the how column in ten lines of 24 characters
    assert how[2] == ("0              stateStoreSave  2024-01-01T00:01:25.000Z  2024-01-01T00:01:25.000Z  checkpoint  "
                      "the global watermark")
    assert " ".join(line[95:] for line in how[2:]) == (
        "the global watermark (offsets/N for eviction, offsets/N-1 for late rows), which every operator upstream "
        "passes on; the operators' order from the checkpoint (no plan: operators taken as one chain, operator 0 last)")
    wide = _table(run_cli("show", CKPT, "--wide").stdout, "Operator watermarks (batch 13)")
    assert len(wide) == 3 and wide[2].endswith(
        "  the global watermark (offsets/N for eviction, offsets/N-1 for late rows), which every operator upstream "
        "passes on; the operators' order from the checkpoint (no plan: operators taken as one chain, operator 0 last)")
    assert run_cli("show", CKPT, "--wide", "--format", "json").stdout == run_cli("show", CKPT, "--format", "json").stdout


def test_every_format_is_an_output_with_rows_and_documents_and_a_one_kind_format_refuses_the_rest():
    import click
    import pytest

    from wmcheck.cli.output import REPORT_OUTPUTS, Output, ParquetOutput, make_output

    with pytest.raises(TypeError, match="abstract methods document, rows"):
        Output()  # type: ignore[abstract]
    for fmt in ("table", "json", "csv"):
        assert isinstance(make_output(fmt), Output)
    for output in (ParquetOutput("/nonexistent/rows.parquet"), *(kind() for kind in REPORT_OUTPUTS.values())):
        with pytest.raises(click.UsageError) as refused:
            output.rows([{"a": 1}])
        assert refused.value.message == f"--format {output.format_name} does not write this command's result"
        with pytest.raises(click.UsageError):
            output.document({}, [], [])
