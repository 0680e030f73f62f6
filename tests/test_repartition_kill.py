"""Real SIGKILLs at every step of ``wmcheck repartition --execute`` and of its undo, each recovered both ways.

``repartition`` is two processes: wmcheck (Python) and the Spark driver JVM it starts (py4j), which writes
Spark's repartition batch. Points, on a relocated copy of the fixture ``dedup_rocksdb_p3`` (and with the full sweep ``join_v3_p3``) (3 -> 5
partitions):

- *python*: every rename, fsync and unlink of the wmcheck process itself (its main thread: strace without
  ``-f`` does not trace the JVM), killed by strace's fault injection. The JVM must then exit by itself
  (pyspark's gateway exits when the pipe from its parent closes): the test waits for every process of the
  run to be gone before it recovers, and fails if one outlives it by a minute.
- *jvm*: every rename the JVM makes into the checkpoint (Spark writes a temp file, then renames it). strace
  ``-f`` delays each rename on entry; while the N-th one into the checkpoint waits, the test SIGKILLs the
  whole process group (strace, wmcheck, the JVM), so that rename never happens (asserted).
- *undo*: every rename, fsync and unlink of ``wmcheck undo`` (no JVM) on the repaired copy.

Recovery as in tests/test_repair_kill.py: re-running the repair (in this process, with the test's Spark
session, idle while a killed run's own JVM runs) ends in the repaired tree, ``undo`` in the original one,
with no journal, lock or temp file left. "The repaired tree" is that of an uninterrupted run, except for
what Spark makes nondeterministic: the state files of the version the repartition writes (snapshot zips,
SST files whose names hold a uuid, their checksums) differ in bytes between any two runs, so for them the
same files (uuids aside) must hold the same state rows (read with the python state engine); every other
file is compared byte for byte. The default run takes a seeded sample (one point of each kind and one
more undo point); ``WMCHECK_FULL_KILL_SWEEP=1`` takes every point (README's benchmark table has its figures).
"""
from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_repair_execute import trees
from test_repair_kill import (
    FULL,
    STRACE,
    TAG,
    command,
    counted,
    kill_at,
    link_copy,
    recovered_both_ways,
    strace_log,
)
from test_repartition_spark import restartable

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.errors import RefusedError
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.repair_records import find_interrupted
from wmcheck.statestore import engines
from wmcheck.statestore.spark.repartition import SparkRepartitioner

pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(STRACE is None and not os.environ.get("CI"), reason="strace is not installed")]

PARTITIONS = 5
NAMES = ["dedup_rocksdb_p3", *(["join_v3_p3"] if FULL else [])]
"""The full sweep also kills the repartition of a stream-stream join (state format 3: four column families in one
store)."""
RENAMES = ("rename", "renameat", "renameat2")
DELAY_US = 300_000
"""How long strace holds each rename on entry: the time the test has to kill the run before it happens."""
TIMEOUT = 600
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
RENAME_LINE = re.compile(r'^(\d+)\s+rename\w*\((?:\w+, )?"([^"]+)", (?:\w+, )?"([^"]+)"', re.M)


def args(root: Path) -> list[str]:
    return ["repartition", str(root / "checkpoint"), "--partitions", str(PARTITIONS), "--file-sink",
            str(root / "output"), "--master", "local[1]"]


def run_pids() -> list[int]:
    """Live processes (not zombies) started by a killed run: those with ``TAG`` in their environment."""
    out = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and f"{TAG}=1".encode() in (proc / "environ").read_bytes().split(b"\0") \
                    and (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                out.append(int(proc.name))
        except OSError:
            continue
    return out


def all_gone(within_s: float) -> None:
    """Wait until every process of the killed run has exited (the JVM on its own); fail after ``within_s``."""
    deadline = time.monotonic() + within_s
    while (left := run_pids()) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes {left} outlived the killed wmcheck by {within_s} s"


def spark_renames(log: str, root: Path) -> list[tuple[str, str]]:
    """(source, target) of every rename into the copy that is not wmcheck's own (its temp files end .wmcheck.tmp)."""
    return [(src, dst) for _pid, src, dst in RENAME_LINE.findall(log)
            if dst.startswith(f"{root}/") and not src.endswith(".wmcheck.tmp")]


def kill_at_spark_rename(root: Path, n: int) -> None:
    """Run the repair with every rename delayed on entry; SIGKILL the process group while the N-th rename of the
    JVM into the copy waits, and check that it did not happen."""
    log = root.parent / "strace-jvm.log"
    delay = ",".join(RENAMES)
    proc = subprocess.Popen([STRACE, "-f", "--seccomp-bpf", "-qq", "-e", "signal=none", "-o", str(log), "-e",
                             f"trace={delay}", "-e", f"inject={delay}:delay_enter={DELAY_US}", *command(args(root))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", TAG: "1"})
    deadline, seen = time.monotonic() + TIMEOUT, []
    while proc.poll() is None and time.monotonic() < deadline:
        seen = spark_renames(log.read_text() if log.exists() else "", root)
        if len(seen) >= n:
            break
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    all_gone(60)
    log.unlink()
    assert len(seen) >= n, f"the run ended after {len(seen)} renames of Spark's, not {n}"
    src, dst = seen[n - 1]
    assert Path(src).exists() and not Path(dst).exists(), f"killed too late: rename {n} ({dst}) happened"


def spark_free(root: Path, original: tuple[dict, dict]) -> tuple[list, dict]:
    """The copy's trees, Spark's new state files by name only (uuids left out: a list, so two such files count twice)."""
    ckpt, sink = trees(root)
    return sorted((UUID.sub("*", k), "new state file" if k.startswith("state/") and k not in original[0] else v)
                  for k, v in ckpt.items()), sink


def state_rows(root: Path, spark) -> list[str]:
    """The state rows (a join's both sides, read with Spark: the python engine does not read join state formats 3-4)."""
    ckpt = str(root / "checkpoint")
    if root.name.startswith("join"):
        return sorted(repr(r.asDict(recursive=True)) for side in ("left", "right")
                      for r in engines.read_state(ckpt, operator=0, store=side, engine="spark", spark=spark).collect())
    return sorted(map(repr, engines.read_state(ckpt, operator=0).to_pylist()))


@pytest.mark.parametrize("name", NAMES)
def test_a_real_kill_at_any_step_of_a_repartition_is_recovered_both_ways(spark, tmp_path, name):
    work = tmp_path / name
    base = restartable(name, tmp_path).rename(tmp_path / "base")  # relocated to ``work``, where every run happens
    original = trees(base)
    link_copy(base, work)
    log = strace_log(args(work), timeout=TIMEOUT)
    ours = {pid for pid, src, _dst in RENAME_LINE.findall(log) if src.endswith(".wmcheck.tmp")}
    assert len(ours) == 1, ours
    python_points = counted(log, ours.pop())
    jvm_points = range(1, len(spark_renames(log, work)) + 1)
    repaired, rows = spark_free(work, original), state_rows(work, spark)
    assert rows and repaired != spark_free(base, original)
    repaired_copy = link_copy(work, tmp_path / "repaired")
    undo_points = counted(strace_log(["undo", str(work / "checkpoint")]))
    assert trees(work) == original
    shutil.rmtree(work)
    kinds = {"jvm": [("jvm", "rename", n) for n in jvm_points], "undo": [("undo", *p) for p in undo_points],
             "python": [("python", *p) for p in python_points]}
    assert len(kinds["python"]) > 10 and len(kinds["jvm"]) >= 2 * 7 and len(kinds["undo"]) > 10
    chosen = [p for kind, every in kinds.items() for p in (every if FULL else random.Random(
        f"repartition-kill-{kind}").sample(every, 2 if kind == "undo" else 1))]

    def is_repaired(root: Path) -> bool:
        return spark_free(root, original) == repaired and state_rows(root, spark) == rows

    def rerun() -> None:
        """The same repartition again (another target is refused while a killed one is pending)."""
        ckpt, now = str(work / "checkpoint"), repair.RunOptions(execute=True, idle_ms=0)
        pending = find_interrupted(open_checkpoint(ckpt).fs)
        if pending is not None:
            with pytest.raises(RefusedError, match=f"an interrupted repartition .backup {pending.head.backup_id}, 3 -> 5 "
                                                   "partitions. must be finished or undone first"):
                repair.run(ckpt, repair.RepartitionRequest(partitions=PARTITIONS - 1, runner=SparkRepartitioner()), now)
        try:
            done = repair.run(ckpt, repair.RepartitionRequest(partitions=PARTITIONS, file_sink=str(work / "output"),
                                                              runner=SparkRepartitioner()), now)
        except RefusedError as exc:  # killed after it finished (in its verification): nothing left to do
            assert pending is None and f"already has {PARTITIONS} partitions" in exc.message, exc.message
            return
        assert done.verification is not None and done.verification.ok, done.verification
        undone = [w for w in done.warnings if "was interrupted: undone first" in w]
        assert undone == ([f"repartition {pending.head.backup_id} was interrupted: undone first (what it wrote is in that "
                           "backup), then run again"] if pending else []), done.warnings

    started = time.monotonic()
    for what, syscall, k in chosen:
        label = f"{what} killed at {syscall} #{k}"
        link_copy(repaired_copy if what == "undo" else base, work)
        if what == "python":
            kill_at(args(work), syscall, k, follow=False, timeout=TIMEOUT)
            all_gone(60)
        elif what == "jvm":
            kill_at_spark_rename(work, k)
        else:
            kill_at(["undo", str(work / "checkpoint")], syscall, k)
        recovered_both_ways(work, label, original, is_repaired, rerun if what != "undo" else None)
        print(f"{label}: recovered both ways ({time.monotonic() - started:.0f} s)", flush=True)
    print(f"repartition of {name}: {len(chosen)} of {sum(map(len, kinds.values()))} kill points recovered both ways "
          f"({', '.join(f'{kind} {len(every)}' for kind, every in kinds.items())}) in {time.monotonic() - started:.0f} s")
