"""A repair that cannot make every change: refused before the first one (an immutable or append-only file or
directory, a read-only file system, a directory this user cannot write), and when something still fails part way
(an OS error injected into a rename), one line saying the checkpoint is half repaired and the two ways out, both
of which work."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_hostile_backups import snapshot
from test_reliability import calls, needs_strace
from test_repair_execute import copy_of, trees
from test_repair_kill import STRACE, cli, leftovers

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.errors import RefusedError

HDFS = "agg_window_hdfs"
REMOVED = "state/0/1/13.delta"
"""A file a rewind to batch 10 moves into the backup."""


def rewind_args(root: Path) -> list[str]:
    return ["rewind", str(root / "checkpoint"), "--to-batch", "10", "--file-sink", str(root / "output")]


def refused_unchanged(root: Path, match: str) -> None:
    before = snapshot(root)
    with pytest.raises(RefusedError, match=match) as got:
        repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=10, file_sink=str(root / "output")),
                   repair.RunOptions(execute=True, idle_ms=0))
    assert "\n" not in str(got.value) and "nothing was changed" in str(got.value)
    assert snapshot(root) == before and not (root / "checkpoint" / "_wmcheck").exists()


def chattr(flag: str, path: Path) -> bool:
    if os.geteuid() != 0 or shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


@pytest.fixture
def attributes() -> Iterator[list[tuple[str, Path]]]:
    """Attributes set by a test (``chattr``), cleared afterwards so that the copy can be removed."""
    made: list[tuple[str, Path]] = []
    yield made
    for flag, path in made:
        chattr(flag.replace("+", "-"), path)


@pytest.mark.parametrize("flag, target, why", [
    ("+i", REMOVED, "the file is immutable"),
    ("+a", REMOVED, "the file is append-only"),
    ("+i", "state/0/1", "the directory is immutable"),
    ("+i", "commits/12", "the file is immutable"),
])
def test_an_immutable_or_append_only_entry_is_refused_before_any_change(flag, target, why, attributes, tmp_path):
    root = copy_of(HDFS, tmp_path)
    path = root / "checkpoint" / target
    if not chattr(flag, path):
        pytest.skip("chattr is not available here (needs root and a file system with attributes)")
    attributes.append((flag, path))
    refused_unchanged(root, f"the repair cannot make every change it needs: {path}: {why}")


def test_a_read_only_file_system_is_refused_before_any_change(tmp_path):
    root = copy_of(HDFS, tmp_path)
    part = root / "checkpoint" / "state" / "0" / "1"
    mount = f"mount --bind {part} {part} && mount -o remount,bind,ro {part}"
    if subprocess.run(["unshare", "-m", "sh", "-c", mount], capture_output=True).returncode != 0:
        pytest.skip("cannot make a read-only bind mount here (needs unshare and mount)")
    before = snapshot(root)
    args = rewind_args(root) + ["--execute", "--idle", "0"]
    script = f'{mount} && exec "$0" -m wmcheck.cli "$@"'
    got = subprocess.run(["unshare", "-m", "sh", "-c", script, sys.executable, *args], capture_output=True, text=True)
    assert got.returncode == 2 and got.stderr.count("\n") == 1
    assert got.stderr.startswith(f"Error: the repair cannot make every change it needs: {part}: the directory is on a "
                                 "read-only file system")
    assert snapshot(root) == before


def test_a_directory_this_user_cannot_write_is_refused_before_any_change():
    nobody = 65534
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run wmcheck as another user")
    top = Path(tempfile.mkdtemp(prefix="wmcheck-uid-"))
    try:
        top.chmod(0o755)
        root = copy_of(HDFS, top)
        for path in [root, *root.rglob("*")]:
            os.chown(path, nobody, nobody, follow_symlinks=False)
        locked = root / "checkpoint" / "state" / "0" / "2"
        os.chown(locked, 0, 0)  # another user's directory, 0755: nobody may not move files out of it
        before = snapshot(root)
        got = subprocess.run(["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups", sys.executable,
                              "-m", "wmcheck.cli", *rewind_args(root), "--execute", "--idle", "0"],
                             capture_output=True, text=True, cwd=top)
        assert got.returncode == 2 and got.stderr.count("\n") == 1, got.stderr
        assert got.stderr.startswith(f"Error: the repair cannot make every change it needs: {locked}: the directory is "
                                     f"not writable by this user (uid {nobody})")
        assert "run as the user that owns the checkpoint" in got.stderr
        assert snapshot(root) == before
    finally:
        shutil.rmtree(top)


# -- failing part way --------------------------------------------------------------------------------


def failing_at_the_third_move(root: Path, scratch: Path) -> str:
    """Run the rewind with the rename of its third step failing (EACCES) and return its error output."""
    renames = calls(rewind_args(scratch) + ["--execute", "--idle", "0"], "rename", scratch)
    moves = [i + 1 for i, a in enumerate(renames) if "/_wmcheck/backups/" in a.split(", ")[-1] and "/files/" in a
             and ".wmcheck.tmp" not in a]
    k = moves[2]
    got = cli(rewind_args(root), [STRACE, "-f", "-qq", "-o", "/dev/null", "-e", "trace=rename",
                                  "-e", f"inject=rename:error=EACCES:when={k}"])
    assert got.returncode == 2, got.stderr
    return got.stderr


@needs_strace
@pytest.mark.parametrize("then", ["undo", "re-run"])
def test_a_repair_failing_part_way_says_so_and_both_ways_out_work(then, tmp_path):
    scratch = copy_of(HDFS, tmp_path, "-scratch")
    root = copy_of(HDFS, tmp_path)
    original = trees(root)
    clean = copy_of(HDFS, tmp_path, "-clean")
    repair.run(str(clean / "checkpoint"), repair.RewindRequest(to_batch=10, file_sink=str(clean / "output")),
               repair.RunOptions(execute=True, idle_ms=0))
    repaired = tuple({k.replace(str(clean), str(root)): v for k, v in t.items()} for t in trees(clean))
    err = failing_at_the_third_move(root, scratch)
    assert err.count("\n") == 1 and ": Permission denied; the repair stopped at step 3 of " in err
    assert err.rstrip().endswith(f": the checkpoint is half repaired (hint: 'wmcheck undo {root / 'checkpoint'}' "
                                 f"restores it, or re-running 'wmcheck rewind {root / 'checkpoint'} --execute' (the same "
                                 "options) finishes it once the cause is fixed)")
    if then == "undo":
        repair.undo_repair(str(root / "checkpoint"), idle_ms=0)
        assert trees(root) == original
    else:
        done = repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=10, file_sink=str(root / "output")),
                          repair.RunOptions(execute=True, idle_ms=0))
        assert done.resumed is not None and done.resumed.steps_done_before == 2
        assert trees(root) == repaired
    assert not leftovers(root)
