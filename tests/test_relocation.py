"""A copied or moved transformWithState checkpoint: schema file names outside it, ``wmcheck relocate``, WM027/WM028.

The fixture ``tws_pandas`` records its schema files under the directory it was generated in; every
test here works on copies whose location it controls, so the results do not depend on where the
repository is checked out.
"""
from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from test_remote import fs_args, s3_options  # noqa: F401  (a module-scoped S3 server of our own)
from test_repair_execute import tree

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.errors import RefusedError
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.relocation import home_uri, schema_references
from wmcheck.checkpoint.validate import check_checkpoint
from wmcheck.cli.output import plain, repair_doc

from conftest import FIXTURES, fixture_facts, run_cli

NAME = "tws_pandas"
SCHEMA = "state/0/_stateSchema/default/0_ca8ba419-8489-44a9-a404-06186defde9d"
METADATA = ["state/0/_metadata/v2/0", "state/0/_metadata/v2/4"]
FORMATS = ["table", "json", "csv"]


def recorded(ckpt: Path) -> list[str]:
    """The schema file URIs the operator metadata files name, in file order."""
    return [u for p in METADATA for line in (ckpt / p).read_text().splitlines()[1:]
            for s in json.loads(line)["stateStoreInfo"] for u in s["stateSchemaFilePaths"]]


@pytest.fixture
def moved(tmp_path) -> Path:
    """A copy of the fixture's checkpoint that names the schema files of ``tmp_path/original``, which is gone."""
    original = tmp_path / "original"
    shutil.copytree(FIXTURES / NAME / "checkpoint", original)
    repair_doc(repair.run(str(original), repair.RelocateRequest(), repair.RunOptions(execute=True, idle_ms=0)))
    shutil.rmtree(original / "_wmcheck")
    moved = tmp_path / "moved"
    shutil.move(original, moved)
    return moved


def test_the_fixture_records_absolute_uris_of_its_generation_root():
    root = fixture_facts(NAME)["root"]
    assert recorded(FIXTURES / NAME / "checkpoint") == [f"file:{root}/checkpoint/{SCHEMA}"] * 2


def test_references_of_a_moved_checkpoint(moved, tmp_path):
    refs = schema_references(open_checkpoint(str(moved)))
    assert [(r.metadata_path, r.uri, r.relative, r.here) for r in refs] == [
        (p, f"file:{tmp_path}/original/{SCHEMA}", SCHEMA, False) for p in METADATA]
    for location in (str(tmp_path / "original"), f"file://{tmp_path}/original"):  # the same place, any spelling
        shutil.copytree(moved, tmp_path / "original", dirs_exist_ok=True)
        assert [r.here for r in schema_references(open_checkpoint(location))] == [True, True]


def test_home_uri_of_a_local_checkpoint_is_a_file_uri():
    local = open_checkpoint(str(FIXTURES / NAME / "checkpoint"))
    assert home_uri(local, SCHEMA, "s3a://b/x/" + SCHEMA) == f"file:{FIXTURES / NAME / 'checkpoint'}/{SCHEMA}"


def test_relocate_rewrites_only_the_names_and_undo_restores_every_byte(moved, tmp_path):
    before = tree(moved)
    dry = repair_doc(repair.run(str(moved), repair.RelocateRequest(), repair.RunOptions(idle_ms=0)))
    assert tree(moved) == before and not (moved / "_wmcheck").exists()
    assert [(s["action"], s["path"], s["phase"], s["crc"]) for s in dry["steps"]] == [
        ("write", p, "state", True) for p in METADATA]
    assert dry["before"]["schema_locations"] == [f"file:{tmp_path}/original"]
    assert dry["notes"] == [f"2 operator metadata file(s) named schema files under file:{tmp_path}/original; "
                            f"they will name the same files under file:{moved}"]
    done = repair_doc(repair.run(str(moved), repair.RelocateRequest(), repair.RunOptions(execute=True, idle_ms=0)))
    assert done["executed"] and done["backup_id"]
    assert recorded(moved) == [f"file:{moved}/{SCHEMA}"] * 2
    changed = {p for p in tree(moved) if tree(moved)[p] != before.get(p)}
    assert changed == {*METADATA, *(p.replace("v2/", "v2/.") + ".crc" for p in METADATA)}
    for path in METADATA:  # the rewritten bytes are the original ones with only the location changed
        assert (moved / path).read_text() == (FIXTURES / NAME / "checkpoint" / path).read_text().replace(
            fixture_facts(NAME)["root"] + "/checkpoint", str(moved))
    assert check_checkpoint(open_checkpoint(str(moved))) == []
    assert repair_doc(repair.run(str(moved), repair.RelocateRequest(), repair.RunOptions(idle_ms=0)))["steps"] == []
    plain(repair.undo_repair(str(moved), idle_ms=0))
    assert tree(moved) == before


def test_relocate_refuses_when_the_schema_file_was_not_copied(moved):
    (moved / SCHEMA).unlink()
    with pytest.raises(RefusedError) as err:
        repair_doc(repair.run(str(moved), repair.RelocateRequest(), repair.RunOptions(idle_ms=0)))
    assert err.value.path == SCHEMA and "copy that file from" in err.value.hint


def test_a_copy_names_the_original_then_fails_once_it_is_gone(moved, tmp_path):
    repair_doc(repair.run(str(moved), repair.RelocateRequest(), repair.RunOptions(execute=True, idle_ms=0)))
    copy = tmp_path / "copy"
    shutil.copytree(moved, copy)
    found = check_checkpoint(open_checkpoint(str(copy)))
    assert [(f.code, f.severity, f.path) for f in found] == [("WM028", "warning", p) for p in METADATA]
    assert found[0].message.startswith(f"names the state schema file file:{moved}/{SCHEMA}, outside this checkpoint")
    shutil.rmtree(moved)
    found = check_checkpoint(open_checkpoint(str(copy)))
    assert [(f.code, f.severity, f.path) for f in found] == [("WM027", "error", p) for p in METADATA]
    assert found[0].message.endswith("relocating names this checkpoint's own schema files (undoable)")
    assert found[0].fix == repair.RelocateRequest()


@pytest.mark.parametrize("fmt", FORMATS)
def test_relocate_on_the_command_line_in_every_format(moved, tmp_path, fmt):
    before = tree(moved)
    out = run_cli("relocate", moved, "--idle", "0", "--format", fmt).stdout
    assert tree(moved) == before
    if fmt == "json":
        doc = json.loads(out)
        assert doc["command"] == "relocate" and doc["executed"] is False and doc["counts"] == {"remove": 0, "write": 2}
        assert [s["path"] for s in doc["steps"]] == METADATA
    elif fmt == "csv":
        rows = dict(list(csv.reader(io.StringIO(out)))[1:])
        assert rows["command"] == "relocate" and rows["steps.1.path"] == METADATA[1]
    else:
        assert "mode:           dry run: nothing was changed (add --execute to apply)" in out
        assert [line.split()[3] for line in out.splitlines() if line.startswith(("0 ", "1 "))] == METADATA
    done = json.loads(run_cli("relocate", moved, "--execute", "--idle", "0", "--format", "json").stdout)
    rows = json.loads(run_cli("backups", moved, "--format", "json").stdout)
    assert [(r["backup_id"], r["command"], r["target"], r["steps"]) for r in rows] == [
        (done["backup_id"], "relocate", "this location", 2)]
    assert recorded(moved) == [f"file:{moved}/{SCHEMA}"] * 2


def test_relocate_errors_are_one_line(moved):
    (moved / SCHEMA).unlink()
    out = run_cli("relocate", moved, "--idle", "0", exit_code=2).output
    assert out.startswith(f"Error: {SCHEMA}: {METADATA[0]} names file:") and len(out.strip().splitlines()) == 1


def test_local_checkpoint_copied_to_s3_is_reported_then_relocated(s3_options, moved):  # noqa: F811
    """On S3 the recorded file: URIs are out of reach (WM027); relocate names s3a:// files of the copy."""
    from pyarrow import fs as pafs

    s3 = pafs.S3FileSystem(**s3_options)
    pafs.copy_files(str(moved), "bucket/tws", destination_filesystem=s3)
    args = fs_args(s3_options)
    rows = json.loads(run_cli("check", "s3a://bucket/tws", "--format", "json", *args, exit_code=1).stdout)
    assert [(r["code"], r["path"]) for r in rows] == [("WM027", p) for p in METADATA]
    doc = json.loads(run_cli("relocate", "s3a://bucket/tws", "--execute", "--idle", "0", "--format", "json", *args).stdout)
    assert [s["path"] for s in doc["steps"]] == METADATA
    text = s3.open_input_file("bucket/tws/" + METADATA[1]).read().decode()
    assert f'"stateSchemaFilePaths":["s3a://bucket/tws/{SCHEMA}"]' in text
    assert json.loads(run_cli("check", "s3://bucket/tws", "--format", "json", *args).stdout) == []


def test_a_checkpoint_copied_within_s3_names_schema_files_looked_up_there(s3_options, moved):  # noqa: F811
    """A copy on S3 of a checkpoint on S3 names the original's schema files: looked up in the bucket, WM028 while they
    are there, WM027 once they are gone (Spark's restart then fails to read them)."""
    from pyarrow import fs as pafs

    s3 = pafs.S3FileSystem(**s3_options)
    pafs.copy_files(str(moved), "bucket/tws-first", destination_filesystem=s3)
    args = fs_args(s3_options)
    run_cli("relocate", "s3a://bucket/tws-first", "--execute", "--idle", "0", *args)
    pafs.copy_files("bucket/tws-first", "bucket/tws-second", source_filesystem=s3, destination_filesystem=s3)
    rows = json.loads(run_cli("check", "s3a://bucket/tws-second", "--format", "json", *args).stdout)
    assert [(r["code"], r["path"]) for r in rows] == [("WM028", p) for p in METADATA]
    assert rows[0]["message"].startswith(f"names the state schema file s3a://bucket/tws-first/{SCHEMA}, outside")
    s3.delete_dir("bucket/tws-first/state")
    rows = json.loads(run_cli("check", "s3a://bucket/tws-second", "--format", "json", *args, exit_code=1).stdout)
    assert [(r["code"], r["path"]) for r in rows] == [("WM027", p) for p in METADATA]


def test_state_on_a_copied_remote_checkpoint_fails_before_spark_with_the_fix(s3_options, moved):  # noqa: F811
    from pyarrow import fs as pafs

    pafs.copy_files(str(moved), "bucket/tws-state", destination_filesystem=pafs.S3FileSystem(**s3_options))
    out = run_cli("state", "s3://bucket/tws-state", "--engine", "spark", *fs_args(s3_options), exit_code=2).output
    assert out.startswith(f"Error: {METADATA[0]}: {METADATA[0]} names the state schema file file:") and (
        "(hint: wmcheck relocate CKPT --execute makes it name its own schema files (undoable))") in out
    assert len(out.strip().splitlines()) == 1


def test_path_map_rewrites_source_and_sink_logs_in_spark_form(copy_fixture):
    root = copy_fixture("agg_window_hdfs")
    facts = fixture_facts("agg_window_hdfs")
    ckpt, sink = root / "checkpoint", root / "output"
    before = tree(root)
    args = ["--path-map", f"{facts['root']}={root}", "--file-sink", sink, "--idle", "0"]
    dry = json.loads(run_cli("relocate", ckpt, *args, "--format", "json").stdout)
    assert tree(root) == before
    sources = sorted(p.name for p in (ckpt / "sources/0").glob("[0-9]*"))
    sink_logs = sorted(p.name for p in (sink / "_spark_metadata").glob("[0-9]*"))
    assert sorted((s["root"], s["path"]) for s in dry["steps"]) == sorted(
        [("checkpoint", f"sources/0/{n}") for n in sources] + [("sink", f"_spark_metadata/{n}") for n in sink_logs])
    assert dry["request"] == {"path_map": {facts["root"]: str(root)}} and dry["file_sink"] == str(sink)
    run_cli("relocate", ckpt, *args, "--execute")
    first = (ckpt / "sources/0/0").read_text().splitlines()[1]
    assert first == f'{{"path":"file://{root}/input/run0-000.json","timestamp":1704067200000,"batchId":0}}'
    assert check_checkpoint(open_checkpoint(str(ckpt)), str(sink)) == []  # sidecars regenerated
    out = run_cli("relocate", ckpt, "--path-map", "/nowhere=/else", "--idle", "0").stdout
    assert "warning:        no file-source log entry names a file under /nowhere" in out


def test_a_local_copy_of_an_s3_checkpoint_names_its_own_files_once_relocated(tmp_path):
    """Metadata written on S3 (s3a:// URIs) in a local copy: out of reach (WM027), relocated to file: URIs."""
    copy = tmp_path / "laptop"
    shutil.copytree(FIXTURES / NAME / "checkpoint", copy)
    for path in METADATA:
        text = (copy / path).read_text().replace(f"file:{fixture_facts(NAME)['root']}/checkpoint", "s3a://prod/ckpt/q1")
        (copy / path).write_text(text)
        (copy / path).with_name(f".{Path(path).name}.crc").unlink()
    found = check_checkpoint(open_checkpoint(str(copy)))
    assert [(f.code, f.path) for f in found] == [("WM027", p) for p in METADATA]
    assert found[0].message.startswith(f"names the state schema file s3a://prod/ckpt/q1/{SCHEMA}, outside")
    doc = repair_doc(repair.run(str(copy), repair.RelocateRequest(), repair.RunOptions(idle_ms=0)))
    assert doc["before"]["schema_locations"] == ["s3a://prod/ckpt/q1"]
    repair_doc(repair.run(str(copy), repair.RelocateRequest(), repair.RunOptions(execute=True, idle_ms=0)))
    assert recorded(copy) == [f"file:{copy}/{SCHEMA}"] * 2


def test_a_path_map_without_equals_is_one_line_with_its_own_example():
    out = run_cli("relocate", FIXTURES / NAME / "checkpoint", "--path-map", "novalue", exit_code=2).output
    assert out == "Error: --path-map expects key=value, got 'novalue' (hint: e.g. --path-map /old/input=/new/input)\n"


def test_relocate_names_the_logged_files_that_are_missing_and_the_path_map_that_finds_them(tmp_path):
    """A copy whose logs name input and sink files under a place that is gone: the dry run says how many are
    missing, names one, and prints the --path-map (from the copy's own layout) that makes them found again."""
    name = "agg_window_hdfs"
    root = Path(shutil.copytree(FIXTURES / name, tmp_path / name))
    ckpt, sink = root / "checkpoint", root / "output"
    repair.run(str(ckpt), repair.RelocateRequest(path_map={fixture_facts(name)["root"]: "/gone/old"}, file_sink=str(sink)),
               repair.RunOptions(execute=True, idle_ms=0))
    shutil.rmtree(ckpt / "_wmcheck")
    doc = json.loads(run_cli("relocate", ckpt, "--file-sink", sink, "--idle", "0", "--format", "json").stdout)
    assert doc["warnings"] == [f"33 of the 33 file(s) the file-source and sink logs name are not where the logs say, e.g. "
                               f"/gone/old/input/run0-000.json: they are under {root}; relocate them with --path-map /gone/old={root}"]
    assert "every file this checkpoint names is where it says" not in json.dumps(doc)
    without_sink = run_cli("relocate", ckpt, "--idle", "0").stdout
    assert "10 of the 10 file(s) the file-source logs name are not where the logs say" in without_sink
    assert f"--path-map /gone/old={root} (and --file-sink SINK for the sink's log)" in without_sink
    run_cli("relocate", ckpt, "--file-sink", sink, "--path-map", f"/gone/old={root}", "--idle", "0", "--execute")
    done = json.loads(run_cli("relocate", ckpt, "--file-sink", sink, "--idle", "0", "--format", "json").stdout)
    assert done["warnings"] == [] and done["notes"] == ["every file this checkpoint names is where it says (33 logged file(s) checked)"]


def test_relocate_without_a_place_for_the_missing_files_says_they_moved_or_were_deleted(tmp_path):
    name = "agg_window_hdfs"
    ckpt = Path(shutil.copytree(FIXTURES / name / "checkpoint", tmp_path / "lonely" / "checkpoint"))
    repair.run(str(ckpt), repair.RelocateRequest(path_map={fixture_facts(name)["root"]: "/gone/old"}),
               repair.RunOptions(execute=True, idle_ms=0))
    shutil.rmtree(ckpt / "_wmcheck")
    out = run_cli("relocate", ckpt, "--idle", "0").stdout
    assert ("10 of the 10 file(s) the file-source logs name are not where the logs say, e.g. /gone/old/input/run0-000.json: "
            "moved or deleted (Spark's cleanSource, a retention job); if they moved, pass --path-map OLD=NEW") in out
