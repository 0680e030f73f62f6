"""Two repairs started at once on one checkpoint: one runs, the other is refused with one clear line;
nothing is left locked or half done."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from test_repair_execute import copy_of, trees

from wmcheck.checkpoint import repair

PAIRS = 6
COMMAND = ["rewind", "--to-batch", "3", "--execute", "--idle", "0"]
STRACE = shutil.which("strace")
SLOW = [STRACE, "-f", "-qq", "-o", "/dev/null", "-e", "trace=rename", "-e", "inject=rename:delay_enter=5000"]
"""Each rename 5 ms late, so that a run lasts longer than the start-up jitter between the two of a pair."""


def start(ckpt: str) -> subprocess.Popen:
    return subprocess.Popen([*(SLOW if STRACE else []), sys.executable, "-m", "wmcheck.cli", COMMAND[0], ckpt, *COMMAND[1:]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


def test_d5_simultaneous_repairs_one_wins_the_other_is_refused(tmp_path):
    base = copy_of("agg_window_rocksdb", tmp_path, "-base")
    original = trees(base)
    done = tmp_path / "done"
    shutil.copytree(base, done)
    repair.run(str(done / "checkpoint"), repair.RewindRequest(to_batch=3), repair.RunOptions(execute=True, idle_ms=0))
    repaired = trees(done)
    refused = 0
    for i in range(PAIRS):
        root = tmp_path / f"pair{i}"
        shutil.copytree(base, root, copy_function=os.link)
        ckpt = str(root / "checkpoint")
        runs = [start(ckpt), start(ckpt)]
        results = [(p.wait(timeout=120), *p.communicate()) for p in runs]
        codes = sorted(code for code, _, _ in results)
        assert codes in ([0, 0], [0, 2]), results
        for code, _, err in results:
            if code == 2:
                refused += 1
                assert err.count("\n") == 1 and "Traceback" not in err, err
                assert err.startswith("Error: _wmcheck/lock: another repair is running on this checkpoint: wmcheck "
                                      "rewind (pid "), err
        assert trees(root) == repaired, f"pair {i}: {results}"
        assert not (root / "checkpoint" / "_wmcheck" / "lock").exists()
        assert [b.status for b in repair.list_backups(ckpt)] == ["applied"]  # the second run found nothing to do
        repair.undo_repair(ckpt, idle_ms=0)
        assert trees(root) == original
        shutil.rmtree(root)
    assert refused >= (PAIRS // 2 if STRACE else 1), f"{refused} of {PAIRS} pairs overlapped: the lock was hardly exercised"
