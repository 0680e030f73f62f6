"""Real SIGKILLs at every rename, fsync and unlink of every repair and of undo (strace fault injection).

Each point runs ``wmcheck <repair> --execute`` (or ``undo``) under ``strace -e inject=SYSCALL:signal=KILL:when=K``
on a copy of a real fixture, then recovers it both ways: re-running the same command must end in
exactly the repaired tree, ``undo`` in exactly the original one (every byte, sidecars included), with
no journal, lock or temp file left; while the tree is neither, ``check`` must name the interrupted
repair (WM026). The default run covers every point of set-watermark and its undo on the HDFS fixture
and a seeded sample of points for rewind and relocate on it and for rewinds of the RocksDB-changelog
and checkpoint-v2 fixtures; ``WMCHECK_FULL_KILL_SWEEP=1`` runs every point everywhere (README's
benchmark table has its figures). tests/test_repartition_kill.py does the same for repartition (wmcheck and its JVM).
"""
from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_repair_execute import copy_of, trees

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.errors import RefusedError
from wmcheck.checkpoint.validate import check_location

from conftest import fixture_facts

SYSCALLS = ("rename", "renameat", "renameat2", "fsync", "fdatasync", "unlink", "unlinkat")
FULL = os.environ.get("WMCHECK_FULL_KILL_SWEEP") == "1"
SAMPLE = 6
STRACE = shutil.which("strace")
TAG = "WMCHECK_KILL_SWEEP_RUN"
"""Set in the environment of every process a killed run starts (the JVM included), to find what outlives it."""

pytestmark = pytest.mark.skipif(STRACE is None and not os.environ.get("CI"), reason="strace is not installed")


@dataclass(frozen=True)
class Scenario:
    fixture: str
    args: Callable[[Path], list[str]]
    """The CLI arguments of the repair (after ``wmcheck``), for the copy at the given root."""
    request: Callable[[Path], repair.RepairRequest]
    """The same repair as a library request (for the in-process recovery)."""


def _rewind(batch: int, sink: bool = True) -> tuple[Callable, Callable]:
    return (lambda r: ["rewind", str(r / "checkpoint"), "--to-batch", str(batch)]
            + (["--file-sink", str(r / "output")] if sink else []),
            lambda r: repair.RewindRequest(to_batch=batch, file_sink=str(r / "output") if sink else None))


def _relocate(fixture: str) -> tuple[Callable, Callable]:
    old = fixture_facts(fixture)["root"]
    return (lambda r: ["relocate", str(r / "checkpoint"), "--path-map", f"{old}={r}", "--file-sink", str(r / "output")],
            lambda r: repair.RelocateRequest(path_map={old: str(r)}, file_sink=str(r / "output")))


LOWER = fixture_facts("agg_window_hdfs")["next_watermark_ms"] - 60_000

SCENARIOS = {
    "hdfs rewind": Scenario("agg_window_hdfs", *_rewind(10)),
    "hdfs set-watermark": Scenario("agg_window_hdfs",  # absolute: re-running after it finished changes nothing
                                   lambda r: ["set-watermark", str(r / "checkpoint"), f"--watermark={LOWER}"],
                                   lambda r: repair.SetWatermarkRequest(watermark=LOWER)),
    "hdfs relocate": Scenario("agg_window_hdfs", *_relocate("agg_window_hdfs")),
    "rocksdb rewind": Scenario("agg_window_rocksdb", *_rewind(9)),
    "checkpoint-v2 rewind": Scenario("checkpoint_v2", *_rewind(10, sink=False)),
    "kafka reset-offsets": Scenario(  # absolute: run again after it finished, it changes nothing
        "kafka_agg", lambda r: ["reset-offsets", str(r / "checkpoint"), "--to-offset", "5", "--file-sink", str(r / "output")],
        lambda r: repair.ResetOffsetsRequest(to_offset=5, file_sink=str(r / "output"))),
}
EVERY_POINT = {"hdfs set-watermark"}


def command(args: list[str]) -> list[str]:
    """``wmcheck <args> --idle 0`` (and ``--execute`` for a repair) as a process."""
    return [sys.executable, "-m", "wmcheck.cli", *args, "--idle", "0", *(["--execute"] if args[0] != "undo" else [])]


def cli(args: list[str], strace: list[str] | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    """Run ``wmcheck`` (under ``strace``) in a process group of its own, tagged with ``TAG`` in its environment."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", TAG: "1"}
    return subprocess.run([*(strace or []), *command(args)], capture_output=True, text=True, env=env, timeout=timeout,
                          start_new_session=True)


def strace_log(args: list[str], trace: tuple[str, ...] = SYSCALLS, timeout: int = 120) -> str:
    """The strace log (every process and thread, lines prefixed by the pid) of a full run of ``args``."""
    log = Path(args[1]).parent / "strace.log"
    done = cli(args, [STRACE, "-f", "--seccomp-bpf", "-qq", "-e", "signal=none", "-o", str(log), "-e", f"trace={','.join(trace)}"],
               timeout)
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    log.unlink()
    return text


def counted(log: str, pid: str | None = None) -> list[tuple[str, int]]:
    """Every (syscall, K) of the log (of one pid: strace counts K per thread): the K-th call of that syscall."""
    calls = [name for who, name in re.findall(r"^(?:(\d+)\s+)?(\w+)\(", log, re.M) if pid is None or who == pid]
    return [(name, k) for name in SYSCALLS for k in range(1, calls.count(name) + 1)]


def points(args: list[str]) -> list[tuple[str, int]]:
    """Every (syscall, K) of a full run of ``args`` (on a throwaway copy)."""
    return counted(strace_log(args))


def kill_at(args: list[str], syscall: str, k: int, follow: bool = True, timeout: int = 120) -> None:
    """Run ``args`` and SIGKILL it at the K-th ``syscall`` (of the first process only, without ``follow``)."""
    got = cli(args, [STRACE, *(["-f"] if follow else []), "-qq", "-o", "/dev/null", "-e", f"trace={syscall}",
                     "-e", f"inject={syscall}:signal=KILL:when={k}"], timeout)
    assert got.returncode != 0, f"not killed at {syscall} #{k}: {got.stdout[-300:]}"


def leftovers(root: Path) -> list[str]:
    """Journal, lock and temp files anywhere under the copy."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.name.endswith(".wmcheck.tmp") or p.name in ("journal.json", "lock") and p.parent.name == "_wmcheck")


def names_interrupted(ckpt: Path) -> bool:
    return any(f.code == "WM026" for f in check_location(str(ckpt)))


def link_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, copy_function=os.link)  # safe: repairs and undo replace files, never edit them
    return dst


def recovered_both_ways(work: Path, label: str, original: tuple[dict, dict], is_repaired: Callable[[Path], bool],
                        rerun: Callable[[], object] | None) -> None:
    """After a kill of the repair (``rerun`` re-runs it) or of undo (``rerun`` None) on the copy at ``work``: ``check``
    names the interrupted repair unless the tree is the original or the repaired one; re-running the repair ends in
    the repaired tree, ``undo`` (of the killed tree) in the original one, with no journal, lock or temp file left.
    Removes ``work``."""
    ckpt = work / "checkpoint"
    assert trees(work) == original or names_interrupted(ckpt) or is_repaired(work), f"{label}: check is silent"
    if rerun is not None:
        killed = work.parent / "killed"
        link_copy(work, killed)
        rerun()
        assert is_repaired(work), f"{label}, then re-run"
        assert not leftovers(work), f"{label}, then re-run: {leftovers(work)}"
        shutil.rmtree(work)
        killed.rename(work)
    try:
        repair.undo_repair(str(ckpt), idle_ms=0)
    except RefusedError as exc:  # killed before the repair recorded anything: nothing to undo
        assert "there is no applied repair to undo" in exc.message, f"{label}, then undo: {exc.message}"
    assert trees(work) == original, f"{label}, then undo"
    assert not leftovers(work), f"{label}, then undo: {leftovers(work)}"
    shutil.rmtree(work)


def sweep(name: str, tmp_path: Path, every: bool) -> int:
    """Kill at the chosen points and recover; every run happens at the same path (relocate writes it into files)."""
    scenario = SCENARIOS[name]
    base = copy_of(scenario.fixture, tmp_path, "-base")
    original = trees(base)
    work = tmp_path / "work"
    ckpt = str(work / "checkpoint")
    link_copy(base, work)
    all_points = points(scenario.args(work))
    repaired = trees(work)
    assert repaired != original and not leftovers(work)
    undo_points = points(["undo", ckpt])
    assert trees(work) == original
    shutil.rmtree(work)
    chosen = [("repair", *p) for p in all_points] + [("undo", *p) for p in undo_points]
    if not every:
        chosen = random.Random(f"{name}-kill").sample(chosen, min(SAMPLE, len(chosen)))
    for what, syscall, k in chosen:
        label = f"{what} killed at {syscall} #{k}"
        link_copy(base, work)
        if what == "repair":
            kill_at(scenario.args(work), syscall, k)
        else:
            repair.run(ckpt, scenario.request(work), repair.RunOptions(execute=True, idle_ms=0))
            kill_at(["undo", ckpt], syscall, k)
        rerun = lambda: repair.run(ckpt, scenario.request(work), repair.RunOptions(execute=True, idle_ms=0))  # noqa: E731
        recovered_both_ways(work, label, original, lambda r: trees(r) == repaired, rerun if what == "repair" else None)
    print(f"{name}: {len(chosen)} of {len(all_points) + len(undo_points)} kill points recovered both ways")
    return len(chosen)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_real_kill_at_any_point_is_recovered_both_ways(name, tmp_path):
    if not FULL and name not in EVERY_POINT:
        assert sweep(name, tmp_path, every=False) == SAMPLE
    else:
        assert sweep(name, tmp_path, every=True) > 10
