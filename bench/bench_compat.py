"""Benchmark ``wmcheck compat`` against a plain restart of the same query on a copy, in one run.

Usage: python bench/bench_compat.py [--fixture agg_window_hdfs] [--repeat 3] [--workdir DIR]

Prepares a copy of the fixture whose logs name its own files (as tests/restart_oracle.prepare does), then
times, alternating, each in a new process as a user runs them (JVM start-up included):

* ``wmcheck compat CKPT --query new_code:new_query`` with the fixture's own query as the new code;
* a script that copies the fixture directory, adds one input file, and restarts the same query on the copy
  for one batch (``trigger(once=True)``): what checking a deploy by hand costs.

Prints the medians and their ratio (target: compat in the time of one micro-batch plus start-up, <= 1.5x).
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

from as_installed import ROOT, compile_wmcheck

NEW_CODE = """import sys
sys.path[:0] = [{fixtures!r}]
import queries

def new_query(spark):
    return queries.FIXTURES[{name!r}]["query"](spark, {input!r}, {checkpoint!r}, {output!r})
"""
RESTART = """import shutil, sys
from pathlib import Path
sys.path[:0] = [{fixtures!r}, {tests!r}]
import queries
from restart_oracle import add_input
from wmcheck.statestore.spark.session import spark_session

src, dst = {src!r}, {dst!r}
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
add_input(Path(dst, "input"), 0)
spark = spark_session()
session = queries.session_for(spark, {name!r})
query = queries.FIXTURES[{name!r}]["query"](session, dst + "/input", dst + "/checkpoint", dst + "/output")
handle = query.trigger(once=True).start()
handle.awaitTermination()
assert handle.exception() is None and handle.recentProgress, handle.exception()
"""


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", default="agg_window_hdfs")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir")
    args = parser.parse_args()
    compile_wmcheck()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-compat-"))
    work.mkdir(parents=True, exist_ok=True)
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "fixtures")]
    from restart_oracle import prepare

    fixture = work / "fixture"
    if not fixture.exists():
        prepare(args.fixture, fixture, extra=0)
    (work / "new_code.py").write_text(NEW_CODE.format(
        fixtures=str(ROOT / "fixtures"), name=args.fixture, input=str(fixture / "input"),
        checkpoint=str(fixture / "checkpoint"), output=str(fixture / "output")))
    (work / "restart.py").write_text(RESTART.format(fixtures=str(ROOT / "fixtures"), tests=str(ROOT / "tests"),
                                                    src=str(fixture), dst=str(work / "copy"), name=args.fixture))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    wmcheck = str(Path(sys.executable).with_name("wmcheck"))
    compat_cmd = [wmcheck, "compat", str(fixture / "checkpoint"), "--query", "new_code:new_query",
                  "--conf", "spark.sql.session.timeZone=UTC"]
    restart_cmd = [sys.executable, str(work / "restart.py")]
    compat_s, restart_s = [], []
    for _ in range(args.repeat):
        restart_s.append(timed(restart_cmd, work, env))
        compat_s.append(timed(compat_cmd, work, env))
    load = os.getloadavg()[0]
    c, r = statistics.median(compat_s), statistics.median(restart_s)
    print(f"fixture {args.fixture}, {args.repeat} alternating runs each, load average {load:.1f}")
    print(f"plain restart of the query on a copy (one batch): {r:.1f} s  (runs: {', '.join(f'{t:.1f}' for t in restart_s)})")
    print(f"wmcheck compat (re-run batch, output, state, watermark): {c:.1f} s  "
          f"(runs: {', '.join(f'{t:.1f}' for t in compat_s)})")
    print(f"ratio: {c / r:.2f}x")


if __name__ == "__main__":
    main()
