"""``wmcheck rewind``, ``set-watermark``, ``undo`` and ``backups`` on the command line: every format, every error path."""
from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_remote import fs_args, s3_options  # noqa: F401  (a module-scoped S3 server of our own)
from test_repair_execute import tree, trees

from conftest import FIXTURES, fixture_facts, fixture_names, run_cli

NAME = "agg_window_hdfs"
FORMATS = ["table", "json", "csv"]


@pytest.fixture
def copy(tmp_path) -> Path:
    if NAME not in fixture_names():
        pytest.skip(f"fixture {NAME} is not generated")
    dst = tmp_path / NAME
    shutil.copytree(FIXTURES / NAME, dst, ignore=shutil.ignore_patterns("input"))
    return dst


def csv_fields(text: str) -> dict[str, str]:
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["field", "value"]
    return dict(rows[1:])


def table_fields(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        label, sep, value = line.partition(": ")
        if sep and not line.startswith(" ") and "  " not in label:
            out.setdefault(label.strip(), []).append(value.strip())
    return out


@pytest.mark.parametrize("fmt", FORMATS)
def test_rewind_dry_run_in_every_format_changes_nothing(copy, fmt):
    facts = fixture_facts(NAME)
    before = tree(copy)
    out = run_cli("rewind", copy / "checkpoint", "--to-batch", "7", "--file-sink", copy / "output", "--idle", "0",
                  "--format", fmt).stdout
    assert tree(copy) == before and not (copy / "checkpoint" / "_wmcheck").exists()
    after_wm = facts["batches"][8]["watermark_ms"]
    if fmt == "json":
        doc = json.loads(out)
        assert doc["before"] == {"last_batch": 12, "last_committed_batch": 12, "watermark_ms": facts["next_watermark_ms"]}
        assert doc["after"]["last_committed_batch"] == 7 and doc["after"]["watermark_ms"] == after_wm
        assert doc["executed"] is False and doc["backup_id"] is None
        assert doc["steps"][0] == {"step": 0, "action": "remove", "root": "checkpoint", "path": "commits/12",
                                   "phase": "commits", "reason": "batch 12 > 7",
                                   "size": (copy / "checkpoint/commits/12").stat().st_size,
                                   "mtime_ms": doc["steps"][0]["mtime_ms"]}
        assert doc["counts"] == {"remove": len(doc["steps"]), "write": 0}
    elif fmt == "csv":
        fields = csv_fields(out)
        assert fields["after.last_committed_batch"] == "7" and fields["before.last_committed_batch"] == "12"
        assert fields["steps.0.path"] == "commits/12" and fields["executed"] == "no"
    else:
        fields = table_fields(out)
        assert fields["mode"] == ["dry run: nothing was changed (add --execute to apply)"]
        assert fields["last committed"] == ["12 -> 7"]
        assert fields["watermark"] == [f"{facts['next_watermark_ms']} (2024-01-01T00:01:25.000Z) -> "
                                       f"{after_wm} (2024-01-01T00:00:53.000Z)"]
        assert fields["note"] == ["target: --to-batch 7"]
        assert "Steps" in out and "commits/12" in out and "sink-data" in out


def test_times_follow_tz(copy):
    out = run_cli("rewind", copy / "checkpoint", "--to-batch", "7", "--idle", "0", "--tz", "Europe/Berlin").stdout
    assert "(2024-01-01T01:01:25.000+01:00) -> " in out


@pytest.mark.parametrize("fmt", FORMATS)
def test_set_watermark_in_every_format(copy, fmt):
    facts = fixture_facts(NAME)
    new = facts["next_watermark_ms"] - 60_000
    out = run_cli("set-watermark", copy / "checkpoint", "--watermark", "-1 minute", "--window", "10 seconds",
                  "--idle", "0", "--format", fmt).stdout
    if fmt == "json":
        doc = json.loads(out)
        assert doc["after"]["watermark_ms"] == new and [s["path"] for s in doc["steps"]] == ["offsets/12", "commits/12"]
        assert "6 window(s) of 10s" in doc["warnings"][1]
    elif fmt == "csv":
        fields = csv_fields(out)
        assert fields["after.watermark_ms"] == str(new) and fields["steps.1.path"] == "commits/12"
    else:
        fields = table_fields(out)
        assert fields["watermark"] == [f"{facts['next_watermark_ms']} (2024-01-01T00:01:25.000Z) -> "
                                       f"{new} (2024-01-01T00:00:25.000Z)"]
        assert fields["changes"] == ["0 file(s) removed (moved into the backup), 2 written"]
        assert len(fields["warning"]) == 2


@pytest.mark.parametrize("fmt", FORMATS)
def test_execute_backups_and_undo_in_every_format(copy, fmt):
    before = trees(copy)
    done = json.loads(run_cli("rewind", copy / "checkpoint", "--shift", "-3", "--file-sink", copy / "output",
                              "--execute", "--idle", "0", "--format", "json").stdout)
    backup_id = done["backup_id"]
    assert done["executed"] and done["after"]["last_committed_batch"] == 9 and done["notes"] == [
        "target: --shift -3 from the last committed batch 12"]
    shown = json.loads(run_cli("show", copy / "checkpoint", "--format", "json").stdout)
    assert shown["last_committed_batch"] == 9 and shown["last_batch"] == 9

    listed = run_cli("backups", copy / "checkpoint", "--format", fmt).stdout
    if fmt == "json":
        (row,) = json.loads(listed)
        assert row["backup_id"] == backup_id and row["status"] == "applied" and row["target"] == "batch 9"
        assert row["steps"] == len(done["steps"]) and row["last_committed_before"] == 12
    elif fmt == "csv":
        (row,) = list(csv.DictReader(io.StringIO(listed)))
        assert row["backup_id"] == backup_id and row["status"] == "applied" and row["steps"] == str(len(done["steps"]))
    else:
        assert backup_id in listed and "applied" in listed and "batch 9" in listed

    undone = run_cli("undo", copy / "checkpoint", "--idle", "0", "--format", fmt).stdout
    assert trees(copy) == before
    if fmt == "json":
        doc = json.loads(undone)
        assert doc["backup_id"] == backup_id and doc["status"] == "undone" and doc["last_committed_batch"] == 12
        assert len(doc["restored"]) == len(done["steps"]) and doc["restored"][0]["path"] == "commits/12"
    elif fmt == "csv":
        fields = csv_fields(undone)
        assert fields["status"] == "undone" and fields["restored.0.restored"] == "moved back"
    else:
        fields = table_fields(undone)
        assert fields["status"] == ["applied -> undone"] and fields["restored"] == [f"{len(done['steps'])} file(s)"]


def test_backups_when_there_are_none(copy):
    assert json.loads(run_cli("backups", copy / "checkpoint", "--format", "json").stdout) == []
    assert run_cli("backups", copy / "checkpoint").stdout.strip() == "(none)"


def test_plan_out_then_from_plan_on_the_command_line(copy, tmp_path):
    plan = tmp_path / "plan.json"
    run_cli("rewind", copy / "checkpoint", "--to-batch", "10", "--plan-out", plan, "--idle", "0")
    out = json.loads(run_cli("rewind", copy / "checkpoint", "--from-plan", plan, "--execute", "--idle", "0",
                             "--format", "json").stdout)
    assert out["executed"] and out["after"]["last_committed_batch"] == 10
    err = run_cli("rewind", copy / "checkpoint", "--from-plan", plan, "--execute", "--idle", "0", exit_code=2).output
    assert err.startswith("Error: the checkpoint changed since the plan was made")


def test_a_saved_plan_with_a_file_sink_executes_without_naming_the_sink_again(copy, tmp_path):
    """The plan names its sink (and shows it): --from-plan FILE --execute applies it to that sink, no --file-sink."""
    plan = tmp_path / "plan.json"
    sink = copy / "output"
    run_cli("rewind", copy / "checkpoint", "--to-batch", "10", "--file-sink", sink, "--plan-out", plan, "--idle", "0")
    done = run_cli("rewind", copy / "checkpoint", "--from-plan", plan, "--execute", "--idle", "0").stdout
    head = done.split("\n")[:4]
    assert head[:3] == ["command:        rewind", f"checkpoint:     {copy / 'checkpoint'}", f"file sink:      {sink}"]
    assert head[3].startswith("mode:           applied; backup ") and head[3].endswith("-rewind")
    assert "changes:        34 file(s) removed (moved into the backup), 0 written" in done.split("\n")
    assert {p.name for p in (sink / "_spark_metadata").iterdir() if not p.name.startswith(".")} == {
        *map(str, range(9)), "9.compact", "10"}  # the sink's log rewound with the checkpoint


@pytest.mark.parametrize("args, message", [
    (["rewind", "{ckpt}", "--to-batch", "13", "--idle", "0"],
     "Error: cannot rewind to batch 13: batch 13 is not committed: the last committed batch is 12 "
     "(hint: the newest batch this checkpoint can be rewound to is 12)"),
    (["rewind", "{ckpt}", "--idle", "0"], "Error: rewind needs exactly one target"),
    (["rewind", "{ckpt}", "--to-batch", "3", "--shift", "-1"], "Error: rewind needs exactly one target, got --to-batch and --shift"),
    (["rewind", "{ckpt}", "--to-time", "yesterday"], "Error: cannot read 'yesterday' as a time"),
    (["rewind", "{ckpt}", "--to-batch", "3", "--idle", "later"], "Error: cannot read 'later' as a duration"),
    (["rewind", "{ckpt}", "--to-batch", "3", "--from-plan", "{ckpt}/nope.json", "--idle", "0"],
     "Error: {ckpt}/nope.json: plan file not found"),
    (["rewind", "{ckpt}/commits", "--to-batch", "3"], "Error: not a Structured Streaming checkpoint"),
    (["rewind", "{ckpt}", "--to-batch", "7", "--execute"], "Error: the query looks active: "),
    (["set-watermark", "{ckpt}", "--idle", "0"], "Error: set-watermark needs --watermark TIME"),
    (["set-watermark", "{ckpt}", "--watermark", "+1 hour", "--idle", "0"], "Error: 2024-01-01T01:01:25.000Z is above the current watermark"),
    (["undo", "{ckpt}", "--idle", "0"], "Error: there is no applied repair to undo"),
    (["undo", "{ckpt}", "--backup", "x", "--idle", "0"], "Error: no backup 'x' in this checkpoint"),
])
def test_errors_are_one_line_with_exit_2(copy, args, message):
    ckpt = str(copy / "checkpoint")
    for path in (copy / "checkpoint").rglob("*"):
        path.touch()  # recently written, as by a running query
    out = run_cli(*[a.format(ckpt=ckpt) for a in args], exit_code=2).output
    assert out.startswith(message.format(ckpt=ckpt)), out
    assert len(out.strip().splitlines()) == 1


def test_repair_commands_do_not_import_pyspark_or_pyarrow(copy):
    code = ("import sys\nfrom wmcheck.cli.main import cli\n"
            f"try:\n    cli(['rewind', {str(copy / 'checkpoint')!r}, '--to-batch', '7', '--idle', '0'])\n"
            "except SystemExit as exc:\n    assert exc.code in (0, None), exc.code\n"
            "print(sorted(m for m in ('pyspark', 'pyarrow') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_rewind_and_undo_on_s3(s3_options):  # noqa: F811
    from pyarrow import fs as pafs

    s3 = pafs.S3FileSystem(**s3_options)

    def objects() -> dict[str, bytes]:
        infos = s3.get_file_info(pafs.FileSelector("bucket/ckpt", recursive=True))
        return {i.path: s3.open_input_file(i.path).read() for i in infos
                if i.type == pafs.FileType.File and "/_wmcheck/" not in i.path}

    before = objects()
    args = fs_args(s3_options)
    doc = json.loads(run_cli("rewind", "s3://bucket/ckpt", "--to-batch", "9", "--execute", "--idle", "0",
                             "--format", "json", *args).stdout)
    assert doc["backup"] == f"s3://bucket/ckpt/_wmcheck/backups/{doc['backup_id']}/files"
    after = objects()
    assert set(before) - set(after) == {f"bucket/ckpt/{s['path']}" for s in doc["steps"]}
    shown = json.loads(run_cli("show", "s3://bucket/ckpt", "--format", "json", *args).stdout)
    assert shown["last_committed_batch"] == 9
    run_cli("undo", "s3://bucket/ckpt", "--idle", "0", *args)
    assert objects() == before


def test_executing_an_empty_plan_makes_no_backup(copy):
    out = run_cli("rewind", copy / "checkpoint", "--to-batch", "12", "--execute", "--idle", "0").stdout
    assert table_fields(out)["mode"] == ["applied; nothing needed changing"]
    assert table_fields(out)["changes"] == ["0 file(s) removed (moved into the backup), 0 written"]
    assert not (copy / "checkpoint" / "_wmcheck").exists()


@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_rewind_dry_run_shows_where_each_source_continues_from(fmt):
    """As kafka-consumer-groups --reset-offsets --dry-run shows each partition's current and new offset."""
    out = run_cli("rewind", FIXTURES / "agg_window_hdfs" / "checkpoint", "--to-batch", "5", "--format", fmt).stdout
    if fmt == "json":
        assert json.loads(out)["sources"] == [{"source_id": "0", "kind": "file", "position": "log batch", "before": "9",
                                               "after": "4"}]
    elif fmt == "csv":
        rows = dict(csv.reader(io.StringIO(out)))
        assert (rows["sources.0.position"], rows["sources.0.before"], rows["sources.0.after"]) == ("log batch", "9", "4")
    else:
        table = out.split("Sources (where each continues from)\n", 1)[1].splitlines()
        assert [line.split() for line in table[:3]] == [["source_id", "kind", "position", "before", "after"],
                                                         ["-----------", "------", "----------", "--------", "-------"],
                                                         ["0", "file", "log", "batch", "9", "4"]]


def test_source_positions_of_kafka_partitions_and_delta_versions(tmp_path):
    """Each Kafka topic partition and a Delta source's version, before (the last batch) and after (the target)."""
    from wmcheck.checkpoint.model import open_checkpoint
    from wmcheck.checkpoint.repair.rewind import source_positions

    ckpt = Path(shutil.copytree(FIXTURES / "agg_window_hdfs" / "checkpoint", tmp_path / "checkpoint"))
    offsets = {5: ['{"orders":{"0":100,"1":200}}', '{"sourceVersion":1,"reservoirId":"t1","reservoirVersion":7,"index":3,"isStartingVersion":false}'],
               12: ['{"orders":{"0":150,"1":260,"2":5}}', '{"sourceVersion":1,"reservoirId":"t1","reservoirVersion":9,"index":-1,"isStartingVersion":false}']}
    for batch, sources in offsets.items():
        lines = (ckpt / "offsets" / str(batch)).read_text().split("\n")[:2]
        (ckpt / "offsets" / str(batch)).write_text("\n".join(lines + sources))
    got = [(p.source_id, p.kind, p.position, p.before, p.after) for p in source_positions(open_checkpoint(str(ckpt)), 5)]
    assert got == [("0", "kafka", "orders/0", "150", "100"), ("0", "kafka", "orders/1", "260", "200"),
                   ("0", "kafka", "orders/2", "5", "earliest"),  # batch 5 had not read it: Spark reads it anew
                   ("1", "delta", "version", "9 index -1", "7 index 3")]
