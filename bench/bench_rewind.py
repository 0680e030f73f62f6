"""Benchmark ``wmcheck rewind --execute`` on 200 partitions x 100 state versions against bare renames, in one run.

Usage: python bench/bench_rewind.py [--fixture agg_window_hdfs] [--partitions 200] [--versions 100]
                                    [--to-batch 49] [--repeat 3]

The synthetic checkpoint is bench_check.py's (a fixture's real files, hard-linked: ``--versions``
batches, one operator with ``--partitions`` HDFS partitions holding every version's delta and a
snapshot every 10 versions, with Hadoop checksums). Each measurement gets a fresh copy. Measured:

* ``baseline``: the least any tool must do in Python: walk the checkpoint and rename every file the
  plan removes into a backup directory (no checks, no journal, no plan);
* ``plan``: ``wmcheck.checkpoint.repair.run`` (a RewindRequest) as a dry run (list, plan, check loadability);
* ``plan + execute``: the same with ``execute=True`` (backup manifest, plan, journal, every move);
* ``wmcheck rewind --execute``: the command as a user runs it (a new Python process);
* ``undo``: ``wmcheck.checkpoint.repair.undo_repair`` right after, restoring every file.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_check import build  # noqa: E402

from wmcheck.checkpoint import repair  # noqa: E402

TARGET_S = 2.0


def fresh(args: argparse.Namespace, tmp: Path, index: int) -> str:
    where = tmp / f"copy{index}"
    build(ROOT / "fixtures" / args.fixture / "checkpoint", where, args.versions, args.partitions, args.versions)
    return str(where / "checkpoint")


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def baseline(ckpt: str, paths: list[str]) -> None:
    """Walk, then rename each planned file into a backup tree: the floor for any safe rewind."""
    for _ in os.walk(ckpt):
        pass
    made = set()
    for rel in paths:
        target = os.path.join(ckpt, "_baseline", rel)
        parent = os.path.dirname(target)
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        os.replace(os.path.join(ckpt, rel), target)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixture", default="agg_window_hdfs")
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--to-batch", type=int, default=49)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {}
    steps = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            ckpt = fresh(args, Path(tmp), 4 * i)
            request = repair.RewindRequest(to_batch=args.to_batch)
            plan = repair.run(ckpt, request, repair.RunOptions(idle_ms=0)).plan
            steps = len(plan.steps)
            results.setdefault("plan", []).append(timed(lambda: repair.run(ckpt, request, repair.RunOptions(idle_ms=0))))
            results.setdefault("plan + execute", []).append(
                timed(lambda: repair.run(ckpt, request, repair.RunOptions(idle_ms=0, execute=True))))
            results.setdefault("undo", []).append(timed(lambda: repair.undo_repair(ckpt, idle_ms=0)))
            other = fresh(args, Path(tmp), 4 * i + 1)
            paths = [s.path for s in plan.steps]
            results.setdefault("baseline", []).append(timed(lambda: baseline(other, paths)))
            cli = fresh(args, Path(tmp), 4 * i + 2)
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "wmcheck.cli", "rewind", cli, "--to-batch", str(args.to_batch),
                            "--execute", "--idle", "0", "--format", "json"], stdout=subprocess.DEVNULL, check=True)
            results.setdefault("wmcheck rewind --execute", []).append((time.perf_counter() - start, float("nan")))
    base_wall, base_cpu = (statistics.median(x[k] for x in results["baseline"]) for k in (0, 1))
    print(f"synthetic checkpoint: {args.partitions} partitions x {args.versions} versions (fixture {args.fixture}); "
          f"rewind to batch {args.to_batch} moves {steps} files; median of {args.repeat}")
    print(f"{'measurement':<26} {'wall s':>8} {'x base':>7} {'cpu s':>8} {'x base':>7}")
    for name in ("baseline", "plan", "plan + execute", "wmcheck rewind --execute", "undo"):
        wall = statistics.median(x[0] for x in results[name])
        cpu = statistics.median(x[1] for x in results[name])
        cpu_text = f"{cpu:>8.3f} {cpu / base_cpu:>7.1f}" if cpu == cpu else f"{'-':>8} {'-':>7}"
        print(f"{name:<26} {wall:>8.3f} {wall / base_wall:>7.1f} {cpu_text}")
    best = statistics.median(x[0] for x in results["plan + execute"])
    print(f"target: plan + execute <= {TARGET_S:g} s wall: {'met' if best <= TARGET_S else 'MISSED'} "
          f"(load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
