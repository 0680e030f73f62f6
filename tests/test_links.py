"""Symbolic and hard links are entries in their own right: a rewind moves a link itself (never what it points to),
undo puts it back as it was, and no tree of links leaves a checkpoint that neither ``undo`` nor a re-run can finish.

The fuzzing that found the dangling-link wedge is a test: seeded whole trees (real fixtures) with files replaced by
dangling links, links inside and outside, link loops, links to directories and hard links, then a rewind executed
(sometimes crashed part way, then re-run) and undone: every repair is refused without a change or ends, after undo,
in exactly the original tree, links as links, with nothing outside the tree touched. ``WMCHECK_FULL_LINK_FUZZ=1``
runs the long sweep.
"""
from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest
from test_hostile_backups import snapshot, victim_dir
from test_repair_execute import copy_of
from test_repair_kill import leftovers

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.repair import InjectedFailure
from wmcheck.checkpoint.repair._hooks import injected

from conftest import fixture_facts

HDFS = "agg_window_hdfs"
FULL = os.environ.get("WMCHECK_FULL_LINK_FUZZ") == "1"
TREES = 400 if FULL else 12
FIXTURES = ("agg_window_hdfs", "agg_window_rocksdb", "checkpoint_v2")
SHM = Path("/dev/shm")


def without_own(tree: dict[str, tuple]) -> dict[str, tuple]:
    return {k: v for k, v in tree.items() if not k.startswith("checkpoint/_wmcheck")}


@pytest.mark.parametrize("backup_dir", [None, "other file system"])
def test_a_dangling_link_a_rewind_removes_comes_back_as_a_link(backup_dir, tmp_path):
    """The wedge: a checksum replaced by a link to a path that no longer exists was moved into the backup, then undo
    could not find it (it followed the link) and left its journal, refusing every later repair."""
    root = copy_of(HDFS, tmp_path)
    crc = root / "checkpoint" / "state" / "0" / "2" / ".13.delta.crc"
    crc.unlink()
    crc.symlink_to(tmp_path / "gone" / ".13.delta.crc")
    original = snapshot(root)
    where = None
    if backup_dir:
        if not SHM.is_dir() or os.stat(SHM).st_dev == os.stat(tmp_path).st_dev:
            pytest.skip("no second local file system (/dev/shm)")
        where = Path(str(SHM / f"wmcheck-test-{os.getpid()}-{tmp_path.name}"))
    try:
        done = repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=10),
                          repair.RunOptions(execute=True, idle_ms=0, backup_dir=str(where) if where else None))
        assert not os.path.lexists(crc)
        assert any(s.path == "state/0/2/.13.delta.crc" for s in done.plan.steps)
        repair.undo_repair(str(root / "checkpoint"), idle_ms=0)
        assert without_own(snapshot(root)) == original
        assert os.readlink(crc) == str(tmp_path / "gone" / ".13.delta.crc")
        again = repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=10),
                           repair.RunOptions(execute=True, idle_ms=0))  # not wedged
        assert again.executed
    finally:
        if where:
            shutil.rmtree(where, ignore_errors=True)


# -- the fuzzer -------------------------------------------------------------------------------------


def entries(root: Path) -> list[Path]:
    """Files of the copy (checkpoint and sink), wmcheck's own left out."""
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and "_wmcheck" not in p.parts)


def mutate(root: Path, victim: Path, rng: random.Random) -> list[str]:
    """Replace a few files (and maybe a directory) by links of every kind; returns what was done."""
    files = entries(root)
    late = [p for p in files if any(part.lstrip(".").split(".")[0].isdigit() and
                                    int(part.lstrip(".").split(".")[0]) > 9 for part in p.parts[-1:])]
    done = []
    for path in rng.sample(late or files, min(len(late or files), rng.randint(1, 4))):
        kind = rng.choice(["dangling", "dangling relative", "inside", "outside", "directory", "loop", "hard outside",
                           "hard inside"])
        path.unlink()
        if kind == "dangling":
            path.symlink_to(root / "nowhere" / path.name)
        elif kind == "dangling relative":
            path.symlink_to(Path("..") / "missing" / path.name)
        elif kind == "inside":
            path.symlink_to(rng.choice([f for f in files if f != path and f.exists()]))
        elif kind == "outside":
            path.symlink_to(victim / "secret")
        elif kind == "directory":
            path.symlink_to(victim / "dir")
        elif kind == "loop":
            path.symlink_to(path)
        elif kind == "hard outside":
            os.link(victim / "secret", path)
        else:
            os.link(rng.choice([f for f in files if f != path and f.exists() and not f.is_symlink()]), path)
        done.append(f"{kind}: {path.relative_to(root)}")
    if rng.random() < 0.2:
        parts = sorted({p.parent for p in files if p.parent.parent.name.isdigit() and p.parent.parent.parent.name == "state"})
        if parts:
            part = rng.choice(parts)
            moved = victim / f"partition-{len(done)}"
            shutil.move(part, moved)
            part.symlink_to(moved)
            done.append(f"partition linked: {part.relative_to(root)}")
    return done


def round_trip(root: Path, victim: Path, rng: random.Random, label: str) -> str:
    """Rewind the mutated copy (maybe crashing part way and re-running) and undo it; returns what happened."""
    ckpt = str(root / "checkpoint")
    facts = fixture_facts(root.name)
    batch = rng.randint(max(0, facts["last_batch"] - 4), facts["last_batch"] - 1)
    sink = str(root / "output") if (root / "output" / "_spark_metadata").is_dir() and rng.random() < 0.7 else None
    request = repair.RewindRequest(to_batch=batch, file_sink=sink)
    original, outside = snapshot(root), snapshot(victim)
    try:
        plan = repair.run(ckpt, request, repair.RunOptions(idle_ms=0)).plan
    except CheckpointError:
        assert snapshot(root) == original, f"{label}: a refused plan changed the tree"
        return "refused at plan"
    crash = rng.choice([None, rng.randint(0, max(0, len(plan.steps)))])
    try:
        with injected(fail_after=crash):
            repair.run(ckpt, request, repair.RunOptions(execute=True, idle_ms=0))
    except InjectedFailure:
        if rng.random() < 0.5:
            repair.run(ckpt, request, repair.RunOptions(execute=True, idle_ms=0))  # re-run finishes it
    except CheckpointError as exc:
        assert without_own(snapshot(root)) == without_own(original), f"{label}: refused ({exc}) after a change"
        assert snapshot(victim) == outside, f"{label}: refused, yet outside touched"
        shutil.rmtree(root / "checkpoint" / "_wmcheck", ignore_errors=True)
        return "refused at execute"
    assert snapshot(victim) == outside, f"{label}: outside touched by the repair"
    repair.undo_repair(ckpt, idle_ms=0)
    assert without_own(snapshot(root)) == without_own(original), f"{label}: undo did not restore the tree"
    assert snapshot(victim) == outside, f"{label}: outside touched by undo"
    assert not leftovers(root), f"{label}: {leftovers(root)}"
    return "crashed, undone" if crash is not None else "undone"


def test_trees_with_links_round_trip_through_rewind_and_undo(tmp_path):
    seen: dict[str, int] = {}
    for seed in range(TREES):
        rng = random.Random(f"links-{seed}")
        work = tmp_path / str(seed)
        root = copy_of(FIXTURES[seed % len(FIXTURES)], work)
        victim = victim_dir(work / "victim")
        done = mutate(root, victim, rng)
        outcome = round_trip(root, victim, rng, f"seed {seed} ({'; '.join(done)})")
        seen[outcome] = seen.get(outcome, 0) + 1
        shutil.rmtree(work)
    print(f"{TREES} trees: {seen}")
    assert seen.get("undone", 0) + seen.get("crashed, undone", 0) >= TREES // 3
