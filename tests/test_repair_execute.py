"""Applying repairs: dry runs change nothing, undo restores every byte, a killed run is undone or finished."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.errors import CheckpointError, RefusedError, spelled
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.repair._hooks import injected
from wmcheck.checkpoint.verdict import show_checkpoint
from wmcheck.cli.output import plain, repair_doc

from conftest import FIXTURES, fixture_facts, fixture_names, run_cli

OWN = "_wmcheck"


def need(name: str) -> Path:
    if name not in fixture_names() and not (FIXTURES / name / "kafka.json").is_file():
        pytest.skip(f"fixture {name} is not generated")
    return FIXTURES / name


def copy_of(name: str, tmp_path: Path, label: str = "") -> Path:
    dst = tmp_path / f"{name}{label}"
    shutil.copytree(need(name), dst, ignore=shutil.ignore_patterns("input"))
    return dst


def tree(root: Path) -> dict[str, str]:
    """sha256 of every file below root, wmcheck's own directory left out."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and rel.parts[0] != OWN:
            out[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def trees(root: Path) -> tuple[dict, dict]:
    return tree(root / "checkpoint"), tree(root / "output")


def where(path: Path, kind: str) -> str:
    return path.as_uri() if kind == "remote" else str(path)


# -- execute and undo ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["local", "remote"])
@pytest.mark.parametrize("name, batch", [("agg_window_hdfs", 7), ("agg_window_rocksdb", 5), ("checkpoint_v2", 6),
                                         ("compaction", 11), ("tws_pandas", 3), ("join_stream_stream", 3)])
def test_execute_then_undo_restores_every_byte(name, batch, kind, tmp_path):
    root = copy_of(name, tmp_path)
    ckpt, sink = root / "checkpoint", where(root / "output", kind)
    before = trees(root)
    doc = repair_doc(repair.run(where(ckpt, kind), repair.RewindRequest(to_batch=batch, file_sink=sink), repair.RunOptions(execute=True, idle_ms=0)))
    assert doc["executed"] and doc["checkpoint"] == where(ckpt, kind).rstrip("/")
    removed = {(s["root"], s["path"]) for s in doc["steps"]}
    assert trees(root) == tuple({k: v for k, v in t.items() if (r, k) not in removed}
                                for r, t in zip(("checkpoint", "sink"), before))
    rewound = open_checkpoint(str(ckpt))
    assert rewound.last_committed_batch == rewound.last_batch == batch
    assert [b["status"] for b in plain(repair.list_backups(str(ckpt)))] == ["applied"]
    saved = Path(doc["backup"].removeprefix("file://"))
    assert all((saved / r / p).exists() for r, p in removed)  # moved, not deleted

    undone = plain(repair.undo_repair(where(ckpt, kind), idle_ms=0))
    assert trees(root) == before
    assert len(undone["restored"]) == len(doc["steps"]) and undone["was"] == "applied"
    assert [b["status"] for b in plain(repair.list_backups(str(ckpt)))] == ["undone"]
    assert not (ckpt / OWN / "journal.json").exists()


def test_set_watermark_execute_and_undo(tmp_path):
    root = copy_of("agg_window_hdfs", tmp_path)
    ckpt = root / "checkpoint"
    before = tree(ckpt)
    facts = fixture_facts("agg_window_hdfs")
    doc = repair_doc(repair.run(str(ckpt), repair.SetWatermarkRequest(watermark="-1 minute"), repair.RunOptions(execute=True, idle_ms=0)))
    assert open_checkpoint(str(ckpt)).watermark_ms == facts["next_watermark_ms"] - 60_000 == doc["after"]["watermark_ms"]
    changed = {p for p, h in tree(ckpt).items() if before.get(p) != h}
    last = facts["last_batch"]
    assert changed == {f"offsets/{last}", f"offsets/.{last}.crc", f"commits/{last}", f"commits/.{last}.crc"}
    plain(repair.undo_repair(str(ckpt), idle_ms=0))
    assert tree(ckpt) == before


def test_backup_dir_outside_the_checkpoint(tmp_path):
    root = copy_of("agg_window_hdfs", tmp_path)
    before = trees(root)
    elsewhere = tmp_path / "backups"
    doc = repair_doc(repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=9, file_sink=str(root / "output")), repair.RunOptions(execute=True, idle_ms=0, backup_dir=str(elsewhere))))
    assert doc["backup"] == str(elsewhere / doc["backup_id"] / "files")
    assert (elsewhere / doc["backup_id"] / "files" / "checkpoint" / "commits" / "12").exists()
    assert (root / "checkpoint" / OWN / "backups" / doc["backup_id"] / "manifest.json").exists()
    plain(repair.undo_repair(str(root / "checkpoint"), idle_ms=0))
    assert trees(root) == before
    with pytest.raises(CheckpointError, match="overlaps"):
        repair_doc(repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=9), repair.RunOptions(execute=True, idle_ms=0, backup_dir=str(root / "checkpoint" / "state"))))


# -- fault injection -------------------------------------------------------------------------


def clean_source_log(root: Path) -> None:
    for f in (root / "checkpoint" / "sources" / "0").iterdir():
        if "compact" not in f.name:
            f.unlink()


SCENARIOS = {
    "rewind with file sink": ("agg_window_hdfs", None,
                              lambda r: repair.RewindRequest(to_batch=10, file_sink=str(r / "output"))),
    "rewind rebuilding a source log": ("agg_window_hdfs", clean_source_log, lambda r: repair.RewindRequest(to_batch=10)),
    "rewind checkpoint v2": ("checkpoint_v2", None, lambda r: repair.RewindRequest(to_batch=11)),
    "set-watermark": ("agg_window_hdfs", None, lambda r: repair.SetWatermarkRequest(watermark="-1 minute")),
}


def run_scenario(request, root: Path, execute: bool = False, fail_after: int | None = None) -> dict:
    """A scenario's repair on the copy at ``root``, as its JSON document; ``fail_after`` injects a crash."""
    with injected(fail_after=fail_after):
        return repair_doc(repair.run(str(root / "checkpoint"), request(root), repair.RunOptions(execute=execute, idle_ms=0)))


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_run_killed_after_any_step_is_undone_or_finished(scenario, tmp_path):
    name, prepare, request = SCENARIOS[scenario]

    def run(root: Path, **kw) -> dict:
        return run_scenario(request, root, **kw)

    base = copy_of(name, tmp_path, "-base")
    if prepare:
        prepare(base)
    original = trees(base)
    done = tmp_path / "done"
    shutil.copytree(base, done)
    steps = len(run(done, execute=True)["steps"])
    finished = trees(done)
    assert finished != original and steps > 1
    if scenario.startswith("rewind rebuilding"):
        assert any(s["action"] == "write" for s in run(base)["steps"])
    for k in range(steps + 1):
        for then in ("undo", "re-run"):
            root = tmp_path / f"k{k}-{then}"
            shutil.copytree(base, root, copy_function=os.link)  # safe: repairs replace files, never edit them
            with pytest.raises(repair.InjectedFailure):
                run(root, execute=True, fail_after=k)
            ckpt = open_checkpoint(str(root / "checkpoint"))
            assert "WM026" in {f.code for f in show_checkpoint(ckpt).findings}  # check's: an interrupted repair
            if then == "undo":
                plain(repair.undo_repair(str(root / "checkpoint"), idle_ms=0))
                assert trees(root) == original, f"undo after {k} steps"
            else:
                doc = run(root, execute=True)
                assert doc["resumed"]["steps_done_before"] == k and doc["executed"]
                assert trees(root) == finished, f"re-run after {k} steps"
                plain(repair.undo_repair(str(root / "checkpoint"), idle_ms=0))
                assert trees(root) == original
            assert not (root / "checkpoint" / OWN / "journal.json").exists()
            shutil.rmtree(root)


def test_an_interrupted_repair_blocks_other_repairs(tmp_path):
    root = copy_of("agg_window_hdfs", tmp_path)
    ckpt = str(root / "checkpoint")
    with pytest.raises(repair.InjectedFailure), injected(fail_after=5):
        repair.run(ckpt, repair.RewindRequest(to_batch=7), repair.RunOptions(execute=True, idle_ms=0))
    shown = repair_doc(repair.run(ckpt, repair.RewindRequest(to_batch=7), repair.RunOptions(idle_ms=0)))
    assert not shown["executed"] and shown["resumed"]["steps_done_before"] == 5
    assert shown["warnings"][0].startswith(f"repair {shown['backup_id']} was interrupted after 5 of ")
    with pytest.raises(RefusedError, match=r"an interrupted rewind .* must be finished or undone first"):
        repair_doc(repair.run(ckpt, repair.SetWatermarkRequest(watermark="-1 minute"), repair.RunOptions(idle_ms=0)))
    with pytest.raises(RefusedError, match="must be finished or undone first"):
        repair_doc(repair.run(ckpt, repair.RewindRequest(to_batch=5), repair.RunOptions(idle_ms=0)))
    assert [b["status"] for b in plain(repair.list_backups(ckpt))] == ["interrupted (apply)"]
    result = run_cli("show", ckpt)
    assert "error WM026 " in result.stdout and "interrupted" in result.stdout


# -- saved plans -----------------------------------------------------------------------------


def test_from_plan_applies_exactly_the_saved_plan(tmp_path):
    root = copy_of("agg_window_hdfs", tmp_path)
    ckpt, out, plan_file = root / "checkpoint", root / "output", tmp_path / "plan.json"
    shown = repair_doc(repair.run(str(ckpt), repair.RewindRequest(to_batch=8, file_sink=str(out)), repair.RunOptions(plan_out=str(plan_file), idle_ms=0)))
    assert json.loads(plan_file.read_text())["steps"] == shown["steps"] and not (ckpt / OWN).exists()
    done = repair_doc(repair.run(str(ckpt), repair.RewindRequest(file_sink=str(out)),
                                 repair.RunOptions(from_plan=str(plan_file), execute=True, idle_ms=0)))
    assert done["steps"] == shown["steps"] and done["executed"]
    assert open_checkpoint(str(ckpt)).last_committed_batch == 8


@pytest.mark.parametrize("change, message", [
    (lambda ckpt: (ckpt / "commits" / "13").write_text("v1\n{}"), "is not as it was|steps then"),
    (lambda ckpt: (ckpt / "state" / "0" / "0" / "13.delta").write_bytes(b"x"), "state/0/0/13.delta is not as it was"),
    (lambda ckpt: (ckpt / "offsets" / "12").unlink(), "changed since the plan was made"),
])
def test_from_plan_refuses_when_the_checkpoint_changed(change, message, tmp_path):
    root = copy_of("agg_window_hdfs", tmp_path)
    ckpt, plan_file = root / "checkpoint", tmp_path / "plan.json"
    repair_doc(repair.run(str(ckpt), repair.RewindRequest(to_batch=8), repair.RunOptions(plan_out=str(plan_file), idle_ms=0)))
    before = tree(ckpt)
    change(ckpt)
    changed = tree(ckpt)
    with pytest.raises(RefusedError, match=message):
        repair_doc(repair.run(str(ckpt), repair.RewindRequest(), repair.RunOptions(from_plan=str(plan_file), execute=True, idle_ms=0)))
    assert tree(ckpt) == changed != before


def test_from_plan_refuses_another_command_or_checkpoint(tmp_path):
    root = copy_of("agg_window_hdfs", tmp_path)
    other = copy_of("agg_window_hdfs", tmp_path, "-other")
    plan_file = tmp_path / "plan.json"
    repair_doc(repair.run(str(root / "checkpoint"), repair.SetWatermarkRequest(watermark="-1 minute"), repair.RunOptions(plan_out=str(plan_file), idle_ms=0)))
    with pytest.raises(RefusedError, match="the plan is for set-watermark, not rewind"):
        repair_doc(repair.run(str(root / "checkpoint"), repair.RewindRequest(), repair.RunOptions(from_plan=str(plan_file), idle_ms=0)))
    with pytest.raises(RefusedError, match="the plan was made for"):
        repair_doc(repair.run(str(other / "checkpoint"), repair.SetWatermarkRequest(), repair.RunOptions(from_plan=str(plan_file), idle_ms=0)))
    done = repair_doc(repair.run(str(root / "checkpoint"), repair.SetWatermarkRequest(), repair.RunOptions(from_plan=str(plan_file), execute=True, idle_ms=0)))
    assert done["after"]["watermark_ms"] == fixture_facts("agg_window_hdfs")["next_watermark_ms"] - 60_000


# -- safety checks ---------------------------------------------------------------------------


def test_an_active_query_is_refused_unless_forced(tmp_path):
    root = copy_of("agg_window_hdfs", tmp_path)
    ckpt = str(root / "checkpoint")
    for path in (root / "checkpoint" / "state").rglob("*"):
        os.utime(path)  # as if the query had just written them
    shown = repair_doc(repair.run(ckpt, repair.RewindRequest(to_batch=7)))
    assert "the query looks active" in shown["warnings"][-1] and "execute would refuse" in spelled(shown["warnings"][-1])
    with pytest.raises(RefusedError, match=r"the query looks active: .* was modified .* ago, within idle_ms 10m"):
        repair_doc(repair.run(ckpt, repair.RewindRequest(to_batch=7), repair.RunOptions(execute=True)))
    assert not (root / "checkpoint" / OWN).exists()
    old = 1_000_000_000
    for path in (root / "checkpoint").rglob("*"):
        os.utime(path, (old, old))
    assert repair_doc(repair.run(ckpt, repair.RewindRequest(to_batch=7), repair.RunOptions(execute=True)))["executed"]  # idle for long enough
    (root / "checkpoint" / "offsets" / "7").touch()
    with pytest.raises(RefusedError, match="offsets/7 was modified"):
        plain(repair.undo_repair(ckpt))
    assert plain(repair.undo_repair(ckpt, force=True))["status"] == "undone"


def test_undo_refuses_when_the_query_ran_since_and_force_keeps_its_files(tmp_path):
    root = copy_of("agg_window_hdfs", tmp_path)
    ckpt = root / "checkpoint"
    before = tree(ckpt)
    doc = repair_doc(repair.run(str(ckpt), repair.RewindRequest(to_batch=7), repair.RunOptions(execute=True, idle_ms=0)))
    (ckpt / "offsets" / "8").write_text("v1\n{}\n{\"logOffset\":7}")  # a restarted query planned batch 8
    with pytest.raises(RefusedError, match="offsets/8 exists again"):
        plain(repair.undo_repair(str(ckpt), idle_ms=0))
    undone = plain(repair.undo_repair(str(ckpt), idle_ms=0, force=True))
    assert tree(ckpt) == before and undone["status"] == "undone"
    displaced = ckpt / OWN / "backups" / doc["backup_id"] / "displaced" / "checkpoint" / "offsets" / "8"
    assert displaced.read_text() == "v1\n{}\n{\"logOffset\":7}"


def test_undo_refuses_what_cannot_be_undone(tmp_path):
    root = copy_of("agg_window_hdfs", tmp_path)
    ckpt = str(root / "checkpoint")
    with pytest.raises(RefusedError, match="there is no applied repair to undo"):
        plain(repair.undo_repair(ckpt, idle_ms=0))
    first = repair_doc(repair.run(ckpt, repair.RewindRequest(to_batch=9), repair.RunOptions(execute=True, idle_ms=0)))["backup_id"]
    second = repair_doc(repair.run(ckpt, repair.SetWatermarkRequest(watermark="-1 minute"), repair.RunOptions(execute=True, idle_ms=0)))["backup_id"]
    assert first != second
    with pytest.raises(RefusedError, match=f"repair {second} was made after {first}"):
        plain(repair.undo_repair(ckpt, backup_id=first, idle_ms=0))
    assert plain(repair.undo_repair(ckpt, idle_ms=0))["backup_id"] == second
    with pytest.raises(RefusedError, match="already undone"):
        plain(repair.undo_repair(ckpt, backup_id=second, idle_ms=0))
    assert plain(repair.undo_repair(ckpt, idle_ms=0))["backup_id"] == first
    with pytest.raises(CheckpointError, match="no backup 'nope'"):
        plain(repair.undo_repair(ckpt, backup_id="nope", idle_ms=0))


def test_file_sink_must_be_a_file_sink_apart_from_the_checkpoint(tmp_path):
    root = copy_of("agg_window_hdfs", tmp_path)
    with pytest.raises(CheckpointError, match="no _spark_metadata/ in .*: not the output directory of a file sink"):
        repair_doc(repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=7, file_sink=str(root / "checkpoint" / "state")), repair.RunOptions(idle_ms=0)))
    with pytest.raises(CheckpointError, match="file sink not found"):
        repair_doc(repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=7, file_sink=str(root / "nope")), repair.RunOptions(idle_ms=0)))


@pytest.mark.parametrize("scenario", ["rewind with file sink", "set-watermark"])
def test_a_killed_undo_is_finished_by_running_it_again(scenario, tmp_path):
    name, _, request = SCENARIOS[scenario]

    def run(root: Path, **kw) -> dict:
        return run_scenario(request, root, **kw)

    base = copy_of(name, tmp_path, "-base")
    original = trees(base)
    steps = len(run(base)["steps"])
    for k in range(steps + 1):
        root = tmp_path / f"k{k}"
        shutil.copytree(base, root, copy_function=os.link)
        run(root, execute=True)
        with pytest.raises(repair.InjectedFailure), injected(fail_after=k):
            repair.undo_repair(str(root / "checkpoint"), idle_ms=0)
        assert [b["status"] for b in plain(repair.list_backups(str(root / "checkpoint")))] == ["interrupted (undo)"]
        with pytest.raises(RefusedError, match="an undo of repair .* was interrupted"):
            run(root, execute=True)
        assert plain(repair.undo_repair(str(root / "checkpoint"), idle_ms=0))["was"] == "undoing"
        assert trees(root) == original, f"undo killed after {k} steps"
        shutil.rmtree(root)
