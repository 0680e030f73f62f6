"""Benchmark ``wmcheck show``, ``batches``, ``--help``, ``check`` and ``state``'s start-up against bare Python start-up, in one run.

Usage: python bench/bench_cli.py [--fixture NAME] [--batches 10000] [--repeat 5] [--instructions]

Builds a synthetic checkpoint of N batches from a fixture's real offsets and commit files (each
batch's files are copies of real Spark files with the batch's watermark), then times whole
commands as a user runs them (a new process each time, wmcheck's bytecode compiled as an install has it) and prints the ratios of wall and CPU time to
``python -c pass`` measured in the same run; ``--instructions`` adds the instructions each command executes
(Valgrind's callgrind, one run each: the same count on a busy machine as on an idle one).
"""
from __future__ import annotations

import argparse
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from as_installed import ROOT, compile_wmcheck  # noqa: E402

TINY = ROOT / "fixtures" / "dedup_rocksdb_p3" / "checkpoint"
"""A RocksDB state of a few keys: ``wmcheck state``'s start-up (as bench_state_engine.py measures it)."""


def median_seconds(cmd: list[str], repeat: int) -> tuple[float, float]:
    """Median wall time and median CPU time (user + system of the child) of ``cmd`` over ``repeat`` runs."""
    times, cpu = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(times), statistics.median(cpu)


def instructions(cmd: list[str]) -> int | None:
    """The instructions ``cmd`` executes in its own process (its children not counted), under Valgrind's callgrind;
    None without Valgrind."""
    if shutil.which("valgrind") is None:
        return None
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    counts = re.findall(r"Collected : (\d+)", done.stderr)
    return int(counts[0]) if counts else None


def build_synthetic(source: Path, target: Path, batches: int) -> None:
    """Offsets and commits 0..N-1 made from the source's last real offsets and commit files."""
    last = max(int(p.name) for p in (source / "offsets").iterdir() if p.name.isdigit())
    offsets = (source / "offsets" / str(last)).read_bytes()
    commit = (source / "commits" / str(last)).read_bytes()
    for sub in ("offsets", "commits"):
        (target / sub).mkdir(parents=True)
    shutil.copy(source / "metadata", target / "metadata")
    for batch in range(batches):
        (target / "offsets" / str(batch)).write_bytes(offsets)
        (target / "commits" / str(batch)).write_bytes(commit)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixture", default="agg_window_hdfs")
    parser.add_argument("--batches", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--instructions", action="store_true", help="also count each command's instructions (Valgrind)")
    args = parser.parse_args()
    fixture = ROOT / "fixtures" / args.fixture / "checkpoint"
    wmcheck = [sys.executable, "-m", "wmcheck.cli"]
    compile_wmcheck()
    with tempfile.TemporaryDirectory() as tmp:
        synthetic = Path(tmp) / "ckpt"
        build_synthetic(fixture, synthetic, args.batches)
        commands = [
            ("python -c pass", [sys.executable, "-c", "pass"]),
            (f"wmcheck show (fixture {args.fixture})", wmcheck + ["show", str(fixture)]),
            (f"wmcheck show ({args.batches} batches)", wmcheck + ["show", str(synthetic)]),
            (f"wmcheck batches --format json ({args.batches} batches)",
             wmcheck + ["batches", str(synthetic), "--format", "json"]),
            ("wmcheck --help", wmcheck + ["--help"]),
            (f"wmcheck check (fixture {args.fixture})", wmcheck + ["check", str(fixture)]),
            ("wmcheck state start-up (dedup_rocksdb_p3)", wmcheck + [
                "state", str(TINY), "--engine", "python", "--older-than-watermark", "--format", "parquet", "--output",
                str(Path(tmp) / "tiny.parquet")]),
        ]
        rows = [(name, median_seconds(cmd, args.repeat), instructions(cmd) if args.instructions else None)
                for name, cmd in commands]
    base, base_ir = rows[0][1], rows[0][2]
    print(f"{'command':<50} {'median s':>9} {'x python':>9} {'CPU s':>7} {'x python':>9}"
          + (f" {'instr. M':>9} {'x python':>9}" if args.instructions else ""))
    for name, (seconds, cpu), count in rows:
        line = f"{name:<50} {seconds:>9.3f} {seconds / base[0]:>9.1f} {cpu:>7.3f} {cpu / max(base[1], 1e-3):>9.1f}"
        if count is not None and base_ir:
            line += f" {count / 1e6:>9.0f} {count / base_ir:>9.1f}"
        print(line)

if __name__ == "__main__":
    main()
