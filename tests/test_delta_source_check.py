"""``check --delta-source PATH`` on copies of fixtures/delta_source_agg whose source table was changed with deltalake
after three more appends (versions 10..12, one row each): re-created at its path (WM089), its log cleaned up below
version 12 (WM090), a data file of version 10 deleted, or vacuumed after a DELETE (WM091); then what delta-spark 4.4
really does when the query restarts (availableNow; tests/delta_source_restarts.py, one child), next to an untouched
copy that gets the same appends (the control run), and with the option or conf each finding's fix names.

Found by those restarts: the re-created table fails the restart with DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE,
also with failOnDataLoss=false; the cleaned-up log fails it with DELTA_MISSING_FILES_UNEXPECTED_VERSION, and with
failOnDataLoss=false the restart reads version 12 only (versions 10 and 11 never); a deleted data file fails the batch
that reads it with FAILED_READ_FILE.FILE_NOT_EXIST, also with failOnDataLoss=false, and with
spark.sql.files.ignoreMissingFiles=true the restart reads on without its row.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

import pytest
from delta_spark import delta_python, relocated_copy, restart
from test_repair_execute import tree

from conftest import FIXTURES, run_cli

deltalake = pytest.importorskip("deltalake")
pa = pytest.importorskip("pyarrow")

NAME = "delta_source_agg"
TABLE_ID = json.loads((FIXTURES / NAME / "checkpoint" / "offsets" / "12").read_text().splitlines()[2])["reservoirId"]
NEW = [[{"id": "a", "ts": "2024-01-01T00:01:50Z", "v": 31}], [{"id": "b", "ts": "2024-01-01T00:02:00Z", "v": 32}],
       [{"id": "c", "ts": "2024-01-01T00:02:10Z", "v": 33}]]
"""The appends after the fixture's runs: versions 10, 11 and 12, one row and one data file each."""
GONE = ("the log of Delta source 0's table no longer holds the commits of versions 10..11 (its JSON commits start at "
        "version 12), and the next batch reads the table from version 10 on (batch 12's end offset): the restart fails "
        "with DELTA_MISSING_FILES_UNEXPECTED_VERSION (Delta stream cannot resume from version 10; transaction log "
        "starts at 12). With the source option failOnDataLoss=false it reads from version 12 on and never reads "
        "versions 10..11 (tested with delta-spark 4.4)")
GONE_FIX = ("to go on from version 12 without the rows of versions 10..11, restart the query with "
            ".option(\"failOnDataLoss\", \"false\") on the Delta source; to read the whole table again, start the query "
            "from a new checkpoint")
FILES = ("1 data file(s) that the commits of Delta source 0's table add at version(s) 10 are gone from its directory "
         "(vacuumed or deleted), and the next batch reads the table from version 10 on: the batch that reads version "
         "10 fails with FAILED_READ_FILE.FILE_NOT_EXIST, also with the source option failOnDataLoss=false; with "
         "spark.sql.files.ignoreMissingFiles=true it reads on without their rows (tested with delta-spark 4.4)")
FILES_FIX = ("restore the files from a backup; to go on without their rows, restart the query with "
             "spark.sql.files.ignoreMissingFiles=true")
REPLACED_FIX = ("to read the table now at the path, start the query from a new checkpoint (it reads the table from its "
                "first version, or from the startingVersion option's); to go on reading the old table, point the query "
                "at it again")


def copy_of(root: Path) -> Path:
    return relocated_copy(NAME, root, "--file-sink", root / "output")


def _schema(table: str):
    return pa.schema([f.remove_metadata() for f in pa.schema(deltalake.DeltaTable(table).schema().to_arrow())])


def _rows(rows: list[dict], schema):
    return pa.Table.from_pylist([{**r, "ts": dt.datetime.fromisoformat(r["ts"].replace("Z", "+00:00"))} for r in rows],
                                schema=schema)


def append(root: Path) -> None:
    table = str(root / "source")
    for rows in NEW:
        deltalake.write_deltalake(table, _rows(rows, _schema(table)), mode="append")


def clean_log(root: Path) -> None:
    """What log retention does: a checkpoint at version 12, the JSON commits (and their .crc) before it removed."""
    deltalake.DeltaTable(str(root / "source")).create_checkpoint()
    log = root / "source" / "_delta_log"
    for name in os.listdir(log):
        if name[:20].isdigit() and int(name[:20]) < 12 and name.endswith((".json", ".crc")):
            (log / name).unlink()


def recreate(root: Path) -> str:
    """The source table removed and written again at its path with the three new rows (one version): its new id."""
    table = str(root / "source")
    schema = _schema(table)
    shutil.rmtree(table)
    deltalake.write_deltalake(table, _rows([r for rows in NEW for r in rows], schema))
    return deltalake.DeltaTable(table).metadata().id


def version_file(root: Path, version: int) -> str:
    actions = (root / "source" / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return next(json.loads(a)["add"]["path"] for a in actions if '"add"' in a)


def delete_file(root: Path) -> str:
    path = version_file(root, 10)
    (root / "source" / path).unlink()
    return path


def vacuum_after_delete(root: Path) -> str:
    """DELETE WHERE id = 'a' (version 13 removes version 10's file, its one row an 'a'), then VACUUM RETAIN 0 HOURS."""
    path = version_file(root, 10)
    table = deltalake.DeltaTable(str(root / "source"))
    table.delete("id = 'a'")
    assert path in table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    return path


def check(root: Path, *extra: str, exit_code: int | None = 1):
    return run_cli("check", root / "checkpoint", "--delta-source", root / "source", *extra, exit_code=exit_code)


def findings(root: Path) -> list[dict]:
    return json.loads(check(root, "--format", "json", exit_code=None).output)


def finding(root: Path, code: str, path: str, message: str, fix: str) -> dict:
    return {"code": code, "severity": "error", "checkpoint": str(root / "checkpoint"), "path": path,
            "message": message, "fix": {"kind": "instruction", "text": fix, "request": None}}


def replaced_message(new_id: str) -> str:
    return (f"the Delta table at source 0's path has id {new_id}, the query read table {TABLE_ID} (the reservoirId of "
            "batch 12's offsets): it was re-created at its path, or is another table. The restart fails with "
            "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE, also with the source option failOnDataLoss=false (tested "
            "with delta-spark 4.4)")


@pytest.fixture
def copy(tmp_path) -> Path:
    return copy_of(tmp_path / NAME)


def test_the_fixtures_source_table_is_as_the_checkpoint_says(copy):
    assert check(copy, "--select", "WM089,WM090,WM091", exit_code=0).output == (
        f"{copy / 'checkpoint'}: ok: 0 error(s), 0 warning(s) from 3 checks\n")
    append(copy)
    assert check(copy, exit_code=0).output == f"{copy / 'checkpoint'}: ok: 0 error(s), 0 warning(s) from 80 checks\n"


def test_a_re_created_source_table_is_wm089(copy):
    append(copy)
    new_id = recreate(copy)
    assert findings(copy) == [finding(copy, "WM089", "../source/_delta_log", replaced_message(new_id), REPLACED_FIX)]
    text = check(copy).output.splitlines()
    assert text[2].split()[:3] == ["error", "WM089", "../source/_delta_log"]
    assert f"{replaced_message(new_id)}  by hand: {REPLACED_FIX}" in text[2]
    assert text[-1] == f"{copy / 'checkpoint'}: FAIL: 1 error(s), 0 warning(s) from 80 checks"


def test_a_cleaned_up_log_is_wm090(copy):
    append(copy)
    clean_log(copy)
    assert findings(copy) == [finding(copy, "WM090", "../source/_delta_log", GONE, GONE_FIX)]
    rows = list(csv_rows(check(copy, "--format", "csv").output))
    assert [(r["code"], r["path"], r["message"]) for r in rows] == [("WM090", "../source/_delta_log", GONE)]


def csv_rows(text: str):
    import csv
    import io

    return csv.DictReader(io.StringIO(text))


def test_a_deleted_data_file_is_wm091(copy):
    append(copy)
    path = delete_file(copy)
    assert findings(copy) == [finding(copy, "WM091", f"../source/{path}", FILES, FILES_FIX)]


def test_a_vacuum_after_a_delete_is_wm091(copy):
    append(copy)
    path = vacuum_after_delete(copy)
    assert findings(copy) == [finding(copy, "WM091", f"../source/{path}", FILES, FILES_FIX)]


def test_a_log_cleaned_up_behind_what_the_query_read_is_no_finding(copy):
    """The JSON commits before version 10 (those the query has read) removed: nothing the next batch reads is gone."""
    append(copy)
    deltalake.DeltaTable(str(copy / "source")).create_checkpoint()
    for name in os.listdir(copy / "source" / "_delta_log"):
        if name[:20].isdigit() and int(name[:20]) < 10 and name.endswith((".json", ".crc")):
            (copy / "source" / "_delta_log" / name).unlink()
    check(copy, "--select", "WM089,WM090,WM091", exit_code=0)


def test_bad_delta_sources_are_one_line_exit_2(copy):
    before = tree(copy)
    result = run_cli("check", copy / "checkpoint", "--delta-source", copy / "input", exit_code=2)
    assert result.output == (f"Error: no _delta_log/ commits in {copy / 'input'}: not a Delta table (hint: pass the "
                             "table's directory (the path the query reads), or omit --delta-source)\n")
    other = FIXTURES / "agg_window_delta"
    result = run_cli("check", other / "checkpoint", "--delta-source", copy / "source", exit_code=2)
    assert result.output == (f"Error: the checkpoint's last committed offsets name no Delta source: {copy / 'source'} "
                             "is not the query's source (hint: pass --delta-source only for a query that reads a Delta "
                             "table)\n")
    result = run_cli("check", copy / "checkpoint", other / "checkpoint", "--delta-source", copy / "source", exit_code=2)
    assert result.output == ("Error: --delta-source belongs to one checkpoint: pass exactly one CKPT with it (hint: see "
                             "wmcheck check --help)\n")
    assert tree(copy) == before


def test_the_python_api_takes_the_delta_sources(copy):
    import wmcheck
    from wmcheck.checkpoint.errors import MissingFileError

    append(copy)
    clean_log(copy)
    found = wmcheck.check(str(copy / "checkpoint"), delta_sources=[str(copy / "source")])
    assert [(f.code, f.path, f.message) for f in found] == [("WM090", "../source/_delta_log", GONE)]
    with pytest.raises(MissingFileError, match="not a Delta table"):
        wmcheck.check(str(copy / "checkpoint"), delta_sources=[str(copy / "input")])


CASES = {
    "control": (None, {}, {}),
    "replaced": ("replaced", {}, {}),
    "replaced-nofail": ("replaced", {"failOnDataLoss": "false"}, {}),
    "replaced-new-checkpoint": ("replaced", {}, {}),
    "log-gone": ("log", {}, {}),
    "log-gone-nofail": ("log", {"failOnDataLoss": "false"}, {}),
    "file-gone": ("file", {}, {}),
    "file-gone-nofail": ("file", {"failOnDataLoss": "false"}, {}),
    "file-gone-ignore": ("file", {}, {"spark.sql.files.ignoreMissingFiles": "true"}),
    "vacuumed": ("vacuum", {"skipChangeCommits": "true"}, {}),
}
"""case -> (what is done to the source table after the appends, the restart's source options, its Spark conf)."""


@pytest.fixture(scope="module")
def restarts(tmp_path_factory):
    """Each case's copy prepared and checked, then restarted by Spark in one child: (findings, outcomes)."""
    delta_python()
    checks, jobs = {}, []
    for case, (damage, options, conf) in CASES.items():
        root = copy_of(tmp_path_factory.mktemp(case) / NAME)
        append(root)
        {"replaced": recreate, "log": clean_log, "file": delete_file, "vacuum": vacuum_after_delete,
         None: lambda _: None}[damage](root)
        checks[case] = findings(root)
        if case == "replaced-new-checkpoint":  # WM089's fix
            shutil.rmtree(root / "checkpoint")
            shutil.rmtree(root / "output")
        jobs.append({"root": str(root), "options": options, "conf": conf})
    out = restart("delta_source_restarts.py", jobs)
    return checks, dict(zip(CASES, out["jobs"]))


def error_class(outcome: dict) -> str | None:
    """The Spark error class the restart failed with (None: it ran)."""
    error = outcome["error"]
    return None if error is None else error.split("terminated with exception: [", 1)[1].split("]", 1)[0]


WINDOW_A = json.dumps({"id": "a", "n": 1, "v_sum": 31, "window": {"end": "2024-01-01T00:02:00.000000Z",
                                                                  "start": "2024-01-01T00:01:50.000000Z"}}, sort_keys=True)
"""The window of version 10's row (a@110, v 31), which the control run's restart emits (the watermark passes it)."""


@pytest.mark.spark
def test_the_control_run_reads_versions_10_to_12(restarts):
    checks, outcomes = restarts
    assert checks["control"] == []
    got = outcomes["control"]
    assert (error_class(got), got["batches"]) == (None, [[13, 1], [14, 1], [15, 1], [16, 0]])
    assert WINDOW_A in got["rows"] and len(got["rows"]) == 22


@pytest.mark.spark
@pytest.mark.parametrize("case", ["replaced", "replaced-nofail"])
def test_wm089_a_re_created_source_table_fails_the_restart(restarts, case):
    checks, outcomes = restarts
    assert [f["code"] for f in checks[case]] == ["WM089"]
    got = outcomes[case]
    assert (error_class(got), got["batches"], len(got["rows"])) == ("DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE", [], 17)


@pytest.mark.spark
def test_wm089s_fix_a_new_checkpoint_reads_the_new_table(restarts):
    got = restarts[1]["replaced-new-checkpoint"]
    assert (error_class(got), got["batches"], got["rows"]) == (None, [[0, 3], [1, 0]], [WINDOW_A])


@pytest.mark.spark
def test_wm090_a_cleaned_up_log_fails_the_restart(restarts):
    checks, outcomes = restarts
    assert [(f["code"], f["message"], f["fix"]["text"]) for f in checks["log-gone"]] == [("WM090", GONE, GONE_FIX)]
    got = outcomes["log-gone"]
    assert (error_class(got), got["batches"], len(got["rows"])) == ("DELTA_MISSING_FILES_UNEXPECTED_VERSION", [], 17)
    assert "Delta stream cannot resume from version 10; transaction log starts at 12." in got["error"]


@pytest.mark.spark
def test_wm090s_fix_fail_on_data_loss_false_reads_from_version_12_only(restarts):
    """Versions 10 and 11 are never read: their rows (a@110, b@120) are missing from the control run's output; the one
    batch with data reads version 12's one row."""
    got, control = restarts[1]["log-gone-nofail"], restarts[1]["control"]
    assert (error_class(got), got["batches"]) == (None, [[13, 1], [14, 0]])
    assert set(got["rows"]) == set(control["rows"]) - {WINDOW_A} and len(got["rows"]) == 21


@pytest.mark.spark
@pytest.mark.parametrize("case", ["file-gone", "file-gone-nofail", "vacuumed"])
def test_wm091_a_gone_data_file_fails_the_batch_that_reads_it(restarts, case):
    checks, outcomes = restarts
    assert [(f["code"], f["message"]) for f in checks[case]] == [("WM091", FILES)]
    got = outcomes[case]
    assert (error_class(got), got["batches"], len(got["rows"])) == ("FAILED_READ_FILE.FILE_NOT_EXIST", [], 17)
    assert checks[case][0]["path"].removeprefix("../") in got["error"]


@pytest.mark.spark
def test_wm091s_fix_ignore_missing_files_reads_on_without_its_rows(restarts):
    got, control = restarts[1]["file-gone-ignore"], restarts[1]["control"]
    assert (error_class(got), got["batches"]) == (None, [[13, 0], [14, 1], [15, 1], [16, 0]])
    assert set(got["rows"]) == set(control["rows"]) - {WINDOW_A} and len(got["rows"]) == 21
