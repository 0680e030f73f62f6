"""The rewind and set-watermark planners on every fixture: exact file sets, apply order, refusals, targets."""
from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from wmcheck.checkpoint.checksums import hadoop_crc_for
from wmcheck.checkpoint.errors import CheckpointError, MalformedFileError, RefusedError, spelled
from wmcheck.checkpoint.fs import open_fs
from wmcheck.checkpoint.layout import sidecar_target
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.repair.plan import dumps, load_plan, sha256
from wmcheck.checkpoint.repair.rewind import FileSink, plan_rewind
from wmcheck.checkpoint.repair.targets import parse_idle, resolve_target
from wmcheck.checkpoint.repair.watermark import plan_set_watermark
from wmcheck.cli.flags import cli_spelling

from conftest import FIXTURES, fixture_facts, fixture_names

TARGETS = {
    "agg_window_hdfs": 7, "agg_spark35": 7, "agg_window_rocksdb": 5, "checkpoint_v2": 6, "chained_aggs": 6,
    "compaction": 11, "dedup_watermark": 4, "join_stream_stream": 3, "multi_watermark_max": 5,
    "pandas_state_timeout": 3, "tws_pandas": 3,
}
VERSIONED = re.compile(r"^\.?(\d+)(?:_[0-9a-fA-F-]+)?\.(?:delta|snapshot|zip|changelog)(?:\.crc)*$")


def need(name: str) -> Path:
    if name not in fixture_names():
        pytest.skip(f"fixture {name} is not generated")
    return FIXTURES / name


def sink_of(root: Path) -> FileSink | None:
    if not (root / "output" / "_spark_metadata").is_dir():
        return None
    fs = open_fs(str(root / "output"))
    return FileSink(fs, fs.uri())


def plan_for(root: Path, batch: int, **kw):
    return plan_rewind(open_checkpoint(str(root / "checkpoint")), batch, sink=sink_of(root), **kw)


def rel_files(base: Path, sub: str) -> list[str]:
    return sorted(str(p.relative_to(base)) for p in (base / sub).rglob("*") if p.is_file())


def batch_of(name: str) -> int:
    """Batch id of a log file or its sidecar: ``12``, ``.12.crc``, ``9.compact``, ``.9.compact.crc``."""
    return int(name.lstrip(".").split(".")[0])


def log_after(base: Path, sub: str, after: int) -> set[str]:
    return {f for f in rel_files(base, sub) if batch_of(Path(f).name) > after}


def zip_refs(path: Path) -> set[str]:
    text = zipfile.ZipFile(io.BytesIO(path.read_bytes())).read("metadata").decode()
    return {f["dfsSstFileName"] for f in json.loads(text.splitlines()[1])["sstFiles"]}


def expected_state(ckpt: Path, batch: int) -> set[str]:
    """State files (and sidecars) of versions > batch + 1, orphaned SSTs, metadata of later batches."""
    version = batch + 1
    out = set()
    for f in rel_files(ckpt, "state"):
        parts = f.split("/")
        match = VERSIONED.match(parts[-1])
        if match and "_metadata" not in parts and "SSTs" not in parts and int(match[1]) > version:
            out.add(f)
        if parts[-3:-1] == ["_metadata", "v2"] and batch_of(parts[-1]) > batch:
            out.add(f)
        if len(parts) > 3 and parts[2] == "_stateSchema" and int(parts[-1].lstrip(".").split("_")[0]) > batch:
            out.add(f)
    for sst_dir in (ckpt / "state").rglob("SSTs"):
        zips = [(int(VERSIONED.match(z.name)[1]), zip_refs(z)) for z in sst_dir.parent.glob("*.zip")]
        kept = set().union(*(r for v, r in zips if v <= version))
        gone = set().union(*(r for v, r in zips if v > version)) - kept
        out |= {f for f in rel_files(ckpt, str(sst_dir.relative_to(ckpt)))
                if f.split("/")[-1].lstrip(".").removesuffix(".crc").removesuffix(".crc") in gone}
    return out


def log_offset(facts: dict, batch: int, side: str | None) -> int:
    """The file-source log batch recorded at ``batch``: one log batch per batch that read a file of that side."""
    return sum(1 for b in facts["batches"] if b["batch"] <= batch
               and any(side is None or f.split("/")[1] == side for f in b["input_files"])) - 1


def expected_removals(name: str, batch: int) -> set[str]:
    root = FIXTURES / name
    ckpt, facts = root / "checkpoint", fixture_facts(name)
    out = {f"checkpoint/{f}" for f in log_after(ckpt, "commits", batch) | log_after(ckpt, "offsets", batch)}
    out |= {f"checkpoint/{f}" for f in expected_state(ckpt, batch)}
    sides = QUERY_SIDES.get(name, [None])
    for index, side in enumerate(sides):
        out |= {f"checkpoint/{f}" for f in log_after(ckpt, f"sources/{index}", log_offset(facts, batch, side))}
    meta = root / "output" / "_spark_metadata"
    if meta.is_dir():
        removed = log_after(root / "output", "_spark_metadata", batch)
        out |= {f"sink/{f}" for f in removed}

        def adds(names):
            return {json.loads(line)["path"].rsplit("/", 1)[1] for n in names if not Path(n).name.startswith(".")
                    for line in (root / "output" / n).read_text().splitlines()[1:]}

        kept = set(rel_files(root / "output", "_spark_metadata")) - removed
        for data in adds(removed) - adds(kept):
            out |= {f"sink/{p.name}" for p in (root / "output").glob(f"*{data}*")}
    return out


QUERY_SIDES = {"join_stream_stream": ["left", "right"], "multi_watermark_max": ["left", "right"]}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_rewind_plan_removes_exactly_the_files_of_later_batches(name):
    root = need(name)
    batch = TARGETS[name]
    plan = plan_for(root, batch)
    got = {f"{s.root}/{s.path}" for s in plan.steps}
    assert all(s.action == "remove" for s in plan.steps)
    assert got == expected_removals(name, batch)
    assert len(got) == len(plan.steps)  # every file once
    facts = fixture_facts(name)
    assert plan.before.last_committed_batch == facts["last_committed_batch"]
    assert plan.after.to_json() == {"last_batch": batch, "last_committed_batch": batch, "next_batch": batch + 1,
                          "watermark_ms": facts["batches"][batch + 1]["watermark_ms"], "next_state_version": batch + 1}


def test_hdfs_plan_literally():
    root = need("agg_window_hdfs")
    plan = plan_for(root, 7)
    paths = [s.path for s in plan.steps]
    assert paths[:4] == ["commits/12", "commits/.12.crc", "offsets/12", "offsets/.12.crc"]
    assert [p for p in paths if p.startswith("sources/")] == [
        "sources/0/9.compact", "sources/0/.9.compact.crc", "sources/0/8", "sources/0/.8.crc", "sources/0/7",
        "sources/0/.7.crc"]
    state = [p for p in paths if p.startswith("state/")]
    assert state[:6] == [f"state/0/{p}/{f}" for p in range(3) for f in ("13.delta", ".13.delta.crc")]
    assert len(state) == 5 * 3 * 2  # versions 9..13, 3 partitions, file and sidecar
    assert [p for p in paths if p.startswith("_spark_metadata/") and ".crc" not in p] == [
        "_spark_metadata/12", "_spark_metadata/11", "_spark_metadata/10", "_spark_metadata/9.compact",
        "_spark_metadata/8"]
    assert plan.warnings == ()


@pytest.mark.parametrize("name", ["agg_window_hdfs", "agg_window_rocksdb", "checkpoint_v2", "join_stream_stream"])
def test_apply_order_keeps_the_checkpoint_restartable(name):
    root = need(name)
    steps = plan_for(root, TARGETS[name]).steps
    phases = [s.phase for s in steps]
    order = ["commits", "offsets", "state", "metadata", "sources", "sink", "sink-data"]
    rank = [order.index("commits" if p == "offsets" else p) for p in phases]
    assert rank == sorted(rank)  # logs first, then state, sources, the sink log, the sink's data files
    logs = [(batch_of(s.path.split("/")[-1]), s.phase) for s in steps if s.phase in ("commits", "offsets")
            and not s.path.split("/")[-1].startswith(".")]
    assert logs == sorted(logs, key=lambda bp: (-bp[0], bp[1]))  # highest batch first, its commit before its offsets
    versions = [int(VERSIONED.match(s.path.split("/")[-1])[1]) for s in steps if s.phase == "state"
                and VERSIONED.match(s.path.split("/")[-1])]
    assert versions == sorted(versions, reverse=True)
    for before, step in zip(steps, steps[1:]):  # every checksum sidecar right after its file
        if sidecar_target(step.path):
            assert owner(step.path) == owner(before.path)


def owner(path: str) -> str:
    """The data file a (possibly nested) checksum sidecar belongs to."""
    while sidecar_target(path):
        path = sidecar_target(path)[1]
    return path


def test_checkpoint_v2_removes_unique_id_files_with_both_checksums():
    root = need("checkpoint_v2")
    paths = {s.path for s in plan_for(root, 6).steps}
    version = next(p for p in (root / "checkpoint" / "state" / "0" / "0").glob("13_*.changelog"))
    assert {f"state/0/0/{version.name}", f"state/0/0/.{version.name}.crc", f"state/0/0/{version.name}.crc",
            f"state/0/0/.{version.name}.crc.crc"} <= paths
    assert not any(re.match(r"state/0/\d/[1-7]_", p) for p in paths)


def test_rocksdb_keeps_every_sst_a_kept_snapshot_references():
    root = need("agg_window_rocksdb")
    paths = {s.path for s in plan_for(root, 5).steps}
    for part in (root / "checkpoint" / "state" / "0").glob("[0-9]*"):
        kept = set().union(*(zip_refs(z) for z in part.glob("*.zip") if int(z.name.split(".")[0]) <= 6))
        assert kept and not {f"state/0/{part.name}/SSTs/{s}" for s in kept} & paths


def test_tws_removes_operator_metadata_of_later_batches_only():
    root = need("tws_pandas")
    paths = {s.path for s in plan_for(root, 3).steps if s.phase == "metadata"}
    assert paths == {"state/0/_metadata/v2/4", "state/0/_metadata/v2/.4.crc"}


def test_foreach_batch_sink_gets_the_batch_id_warning():
    root = need("pandas_state_timeout")
    plan = plan_for(root, 3)
    assert len(plan.warnings) == 1 and "no file_sink given" in spelled(plan.warnings[0]) and "4..8" in plan.warnings[0]


def test_keep_next_offsets_keeps_batch_n_plus_1_and_its_source_files():
    root = need("agg_window_hdfs")
    plan = plan_for(root, 5, keep_next_offsets=True)
    paths = {s.path for s in plan.steps}
    assert "offsets/6" not in paths and "commits/6" in paths and "offsets/7" in paths
    assert {p for p in paths if p.startswith("sources/0/") and ".crc" not in p} == {"sources/0/6", "sources/0/7",
                                                                                    "sources/0/8", "sources/0/9.compact"}
    assert plan.after.last_batch == 6 and plan.after.last_committed_batch == 5
    assert plan.after.watermark_ms == fixture_facts("agg_window_hdfs")["batches"][6]["watermark_ms"]


def test_keep_source_log_leaves_the_log_and_says_what_follows():
    root = need("agg_window_hdfs")
    plan = plan_for(root, 5, keep_source_log=True)
    assert not any(s.phase == "sources" for s in plan.steps)
    assert any("sources/0 keeps log batches 5..9" in w and "batch 6 at once" in w for w in plan.warnings)


def copy_of(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name
    shutil.copytree(need(name), dst, ignore=shutil.ignore_patterns("input"))
    return dst


def test_a_cleaned_up_source_log_is_rebuilt_from_the_compact_file(tmp_path):
    root = copy_of("agg_window_hdfs", tmp_path)
    log = root / "checkpoint" / "sources" / "0"
    for f in log.iterdir():
        if "compact" not in f.name:
            f.unlink()  # what Spark's log cleanup leaves: 9.compact holds every entry
    plan = plan_for(root, 5)
    steps = [s for s in plan.steps if s.phase == "sources"]
    assert [(s.action, s.path) for s in steps] == [
        ("write", "sources/0/4.compact"), ("remove", "sources/0/9.compact"), ("remove", "sources/0/.9.compact.crc")]
    lines = (log / "9.compact").read_text().splitlines()
    assert steps[0].data == "\n".join(lines[:1] + [line for line in lines[1:] if json.loads(line)["batchId"] <= 4]).encode()
    assert steps[0].crc and steps[0].sha256 is None and len(steps[0].data.splitlines()) == 6


def test_a_source_log_with_nothing_to_rebuild_from_is_refused(tmp_path):
    root = copy_of("agg_window_hdfs", tmp_path)
    for f in (root / "checkpoint" / "sources" / "0").iterdir():
        if not f.name.startswith((".9", "9")) and "compact" not in f.name:
            f.unlink()
    (root / "checkpoint" / "sources" / "0" / "9.compact").unlink()
    with pytest.raises(RefusedError, match="sources/0/4 is gone") as err:
        plan_for(root, 5)
    assert err.value.oldest_batch is None


def test_a_compacted_sink_log_is_refused_with_the_oldest_batch(tmp_path):
    root = copy_of("agg_window_hdfs", tmp_path)
    for f in (root / "output" / "_spark_metadata").iterdir():
        if batch_of(f.name) < 9:
            f.unlink()
    with pytest.raises(RefusedError, match=r"file sink: _spark_metadata/5 is gone .*carry no batch id") as err:
        plan_for(root, 5)
    assert err.value.oldest_batch == 9 and "rewound to is 9" in str(err.value)


def test_purged_batches_are_refused_with_the_oldest_batch():
    root = need("compaction")
    with pytest.raises(RefusedError, match="commits/9 no longer exists") as err:
        plan_for(root, 9)
    assert err.value.oldest_batch == 11
    with pytest.raises(RefusedError, match="batch 13 is not committed: the last committed batch is 12"):
        plan_for(root, 13)


def test_a_batch_whose_previous_offsets_were_purged_is_refused_with_the_oldest_batch():
    """compaction keeps offsets/10 to 12: as the last offsets file, offsets/10 needs offsets/9 (where batch 10
    started), so 11 is the oldest batch; keeping offsets/11 makes 10 work (Spark then reads offsets/10)."""
    root = need("compaction")
    with pytest.raises(RefusedError) as err:
        plan_for(root, 10)
    assert err.value.text(cli_spelling) == (
        "cannot rewind to batch 10: offsets/9 no longer exists: Spark restarting with offsets/10 as the last offsets "
        "file reads it as where batch 10 started, and fails ('batch 9 doesn't exist'); with --keep-next-offsets it "
        "reads offsets/10 instead (hint: the oldest batch this checkpoint can be rewound to is 11)")
    assert err.value.oldest_batch == 11
    assert plan_for(root, 11).after.last_batch == 11
    kept = plan_for(root, 10, keep_next_offsets=True)
    assert (kept.after.last_batch, kept.after.last_committed_batch) == (11, 10)
    with pytest.raises(RefusedError, match="commits/9 no longer exists") as err:
        plan_for(root, 9, keep_next_offsets=True)
    assert err.value.oldest_batch == 10


def test_batch_0_needs_no_offsets_before_it_and_batch_1_needs_offsets_0(tmp_path):
    root = copy_of("agg_window_hdfs", tmp_path)
    assert plan_for(root, 0).after.last_batch == 0
    for name in ("0", ".0.crc"):
        (root / "checkpoint" / "offsets" / name).unlink()
    with pytest.raises(RefusedError, match=r"offsets/0 no longer exists: .*'batch 0 doesn't exist'") as err:
        plan_for(root, 1)
    assert err.value.oldest_batch == 2
    assert plan_for(root, 1, keep_next_offsets=True).after.last_batch == 2


def test_purged_state_is_refused_with_the_oldest_batch(tmp_path):
    root = copy_of("agg_window_rocksdb", tmp_path)
    for f in (root / "checkpoint" / "state" / "0").glob("*/*"):
        match = VERSIONED.match(f.name)
        if f.is_file() and match and int(match[1]) < 6:
            f.unlink()  # retention: nothing older than the snapshot of version 6
    with pytest.raises(RefusedError, match=r"state version 4 can no longer be rebuilt in state/0/0, state/0/1") as err:
        plan_for(root, 3)
    assert err.value.oldest_batch == 5
    assert plan_for(root, 5).after.next_state_version == 6


# -- targets ---------------------------------------------------------------------------------


def effective(facts: dict, batch: int) -> int:
    """The watermark batch ``batch`` leaves behind: what the next batch ran with."""
    nxt = [b for b in facts["batches"] if b["batch"] == batch + 1]
    return nxt[0]["watermark_ms"] if nxt else facts["next_watermark_ms"]


def test_targets_resolve_to_exact_batches():
    need("agg_window_hdfs")
    facts = fixture_facts("agg_window_hdfs")
    ckpt = open_checkpoint(str(FIXTURES / "agg_window_hdfs" / "checkpoint"))
    assert resolve_target(ckpt, to_batch=4).batch == 4
    assert resolve_target(ckpt, shift=-3).batch == facts["last_committed_batch"] - 3
    for batch in (3, 8):
        wm = effective(facts, batch)
        want = max(b["batch"] for b in facts["batches"] if effective(facts, b["batch"]) <= wm)
        assert resolve_target(ckpt, to_watermark=str(wm)).batch == want
    relative = facts["next_watermark_ms"] - 30_000
    want = max(b["batch"] for b in facts["batches"] if effective(facts, b["batch"]) <= relative)
    assert resolve_target(ckpt, to_watermark="-30 seconds").batch == want
    stamp = ckpt.offsets(6).metadata.batch_timestamp_ms
    assert resolve_target(ckpt, to_time=str(stamp)).batch == 6
    assert resolve_target(ckpt, to_time=str(stamp - 1)).batch == 5
    assert resolve_target(ckpt, to_time="-1 days", now=stamp).batch is None
    with pytest.raises(CheckpointError, match="exactly one target"):
        resolve_target(ckpt, to_batch=1, shift=-1)
    with pytest.raises(CheckpointError, match="shift must be negative .* got 2 .hint: e.g. shift=-3") as info:
        resolve_target(ckpt, shift=2)
    assert info.value.param == "shift"


def test_idle_parsing():
    assert parse_idle("0") == 0 and parse_idle("10") == 600_000 and parse_idle("30s") == 30_000
    assert parse_idle("10 minutes") == 600_000
    with pytest.raises(CheckpointError, match="duration"):
        parse_idle("soon")


# -- set-watermark ---------------------------------------------------------------------------


def test_set_watermark_rewrites_both_files_exactly():
    root = need("agg_window_hdfs")
    ckpt = open_checkpoint(str(root / "checkpoint"))
    facts = fixture_facts("agg_window_hdfs")
    last, old, new = facts["last_batch"], facts["next_watermark_ms"], facts["next_watermark_ms"] - 60_000
    plan = plan_set_watermark(ckpt, new)
    assert [s.path for s in plan.steps] == [f"offsets/{last}", f"commits/{last}"]
    for step in plan.steps:
        original = (root / "checkpoint" / step.path).read_bytes()
        key = "batchWatermarkMs" if step.phase == "offsets" else "nextBatchWatermarkMs"
        assert step.data == original.replace(f'"{key}":{old}'.encode(), f'"{key}":{new}'.encode())
        assert step.data != original and step.sha256 == sha256(original) and step.crc
        assert step.crc_sha256 == sha256((root / "checkpoint" / step.sidecar).read_bytes())
        assert hadoop_crc_for(original) == (root / "checkpoint" / step.sidecar).read_bytes()
    assert plan.before.watermark_ms == old and plan.after.watermark_ms == new
    assert "lowering the watermark by 1m" in plan.warnings[0]
    assert "(pass window to list them)" in spelled(plan.warnings[1])


def test_set_watermark_lists_reopened_windows_and_refuses_raising():
    root = need("agg_window_hdfs")
    ckpt = open_checkpoint(str(root / "checkpoint"))
    old = ckpt.watermark_ms
    plan = plan_set_watermark(ckpt, old - 30_000, window_ms=10_000)
    assert "3 window(s) of 10s" in plan.warnings[1]
    with pytest.raises(RefusedError, match="above the current watermark"):
        plan_set_watermark(ckpt, old + 1)
    raised = plan_set_watermark(ckpt, old + 1000, allow_raise=True)
    assert "raising the watermark by 1s" in raised.warnings[0]
    with pytest.raises(RefusedError, match="cannot be negative"):
        plan_set_watermark(ckpt, -1)
    assert plan_set_watermark(ckpt, old).steps == ()


# -- the plan file ---------------------------------------------------------------------------


def test_plan_json_round_trips():
    root = need("agg_window_hdfs")
    plan = plan_for(root, 7)
    back = load_plan(dumps(plan), "plan.json")
    assert back.same_changes(plan) and back.to_json() == plan.to_json()
    watermark = plan_set_watermark(open_checkpoint(str(root / "checkpoint")), 0)
    assert load_plan(dumps(watermark), "p").steps == watermark.steps


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(format="other"), 'expected a JSON object with "format"'),
    (lambda d: d.update(version=9), "plan version 9"),
    (lambda d: d["steps"][0].update(path="../outside"), "is not a plain path inside"),
    (lambda d: d["steps"][0].update(path="_wmcheck/journal.json"), "is not a plain path inside"),
    (lambda d: d["steps"][0].update(action="chmod"), "unknown action"),
    (lambda d: d["steps"][1].update(data_base64="eA=="), "data does not match new_sha256"),
    (lambda d: d.pop("request"), "missing or invalid field"),
])
def test_bad_plan_files_are_rejected(edit, message):
    root = need("agg_window_hdfs")
    doc = plan_set_watermark(open_checkpoint(str(root / "checkpoint")), 0).to_json()
    edit(doc)
    with pytest.raises(MalformedFileError, match=message):
        load_plan(json.dumps(doc), "plan.json")
    with pytest.raises(MalformedFileError, match="invalid JSON"):
        load_plan("{", "plan.json")


def test_set_watermark_on_a_pending_batch_rewrites_its_offsets_only(tmp_path):
    root = copy_of("agg_window_hdfs", tmp_path)
    last = fixture_facts("agg_window_hdfs")["last_batch"]
    for name in (str(last), f".{last}.crc"):
        (root / "checkpoint" / "commits" / name).unlink()  # batch 12 planned, not committed
    ckpt = open_checkpoint(str(root / "checkpoint"))
    plan = plan_set_watermark(ckpt, 1704067200000)
    assert [s.path for s in plan.steps] == [f"offsets/{last}"]
    assert plan.before.watermark_ms == fixture_facts("agg_window_hdfs")["batches"][last]["watermark_ms"]
    assert plan.after.to_json() == {"last_batch": last, "last_committed_batch": last - 1, "next_batch": last,
                                    "watermark_ms": 1704067200000}


def test_rewinding_to_the_last_committed_batch_changes_nothing_and_keep_next_needs_a_next():
    root = need("agg_window_hdfs")
    last = fixture_facts("agg_window_hdfs")["last_committed_batch"]
    assert plan_for(root, last).steps == ()
    with pytest.raises(RefusedError, match=f"there is no offsets/{last + 1} to keep"):
        plan_for(root, last, keep_next_offsets=True)
