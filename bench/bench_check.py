"""Benchmark ``wmcheck check`` on a large synthetic checkpoint against bare Python start-up, in one run.

Usage: python bench/bench_check.py [--fixture agg_window_hdfs] [--batches 10000] [--partitions 200]
                                   [--versions 100] [--repeat 5]

The synthetic checkpoint is made of a fixture's real files (no Spark): every ``offsets/N`` and
``commits/N`` is the fixture's last one (with its Hadoop ``.crc``), the source log is copied, and
every state partition holds the last ``--versions`` versions as the fixture's real delta files,
with a snapshot every 10 versions (a real ``1.delta``: the first delta of a store is a full copy
of its state, so it is a valid snapshot). The operator metadata and the pinned partition count are
rewritten for ``--partitions`` (with fresh Hadoop checksums). Files are hard links where the file
system allows it, so the checkpoint is quick to build. Then ``wmcheck check`` (which decodes every state file the next batch loads) and ``wmcheck check
--no-content`` (names only) are timed as a user runs them (a new process each time) and compared to
``python -c pass`` measured in the same run.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def median_seconds(cmd: list[str], repeat: int) -> tuple[float, float]:
    """Median wall time and median CPU time (user + system) of ``cmd`` run ``repeat`` times."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr}")
    return statistics.median(walls), statistics.median(cpus)


def link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def with_crc(path: Path, data: bytes) -> None:
    """Write ``data`` and its Hadoop sidecar, as Hadoop's local file system does."""
    from wmcheck.checkpoint.checksums import hadoop_crc_for

    path.write_bytes(data)
    path.with_name(f".{path.name}.crc").write_bytes(hadoop_crc_for(data))


def build(source: Path, target: Path, batches: int, partitions: int, versions: int) -> None:
    """The synthetic checkpoint described in the module docstring."""
    last = max(int(p.name) for p in (source / "offsets").iterdir() if p.name.isdigit())
    lines = (source / "offsets" / str(last)).read_text().split("\n")
    meta = json.loads(lines[1])
    meta["conf"]["spark.sql.shuffle.partitions"] = str(partitions)
    template = target / "template"
    template.mkdir(parents=True)
    with_crc(template / "offsets", "\n".join([lines[0], json.dumps(meta, separators=(",", ":")), *lines[2:]]).encode())
    ckpt = target / "checkpoint"
    for sub in ("offsets", "commits"):
        (ckpt / sub).mkdir(parents=True)
    for name in ("metadata", ".metadata.crc"):
        shutil.copyfile(source / name, ckpt / name)
    shutil.copytree(source / "sources", ckpt / "sources")
    commit = source / "commits" / str(last)
    for batch in range(batches):
        link(template / "offsets", ckpt / "offsets" / str(batch))
        link(template / ".offsets.crc", ckpt / "offsets" / f".{batch}.crc")
        link(commit, ckpt / "commits" / str(batch))
        link(commit.with_name(f".{last}.crc"), ckpt / "commits" / f".{batch}.crc")
    op_meta = (source / "state" / "0" / "_metadata" / "metadata").read_text().split("\n")
    info = json.loads(op_meta[1])
    info["stateStoreInfo"][0]["numPartitions"] = partitions
    (ckpt / "state" / "0" / "_metadata").mkdir(parents=True)
    with_crc(ckpt / "state" / "0" / "_metadata" / "metadata",
             f"{op_meta[0]}\n{json.dumps(info, separators=(',', ':'))}".encode())
    real = source / "state" / "0" / "0"
    delta, snapshot = real / f"{last + 1}.delta", real / "1.delta"
    newest = batches  # the version the next batch loads: last committed batch + 1
    for part in range(partitions):
        folder = ckpt / "state" / "0" / str(part)
        folder.mkdir()
        for version in range(newest - versions + 1, newest + 1):
            link(delta, folder / f"{version}.delta")
            link(delta.with_name(f".{delta.name}.crc"), folder / f".{version}.delta.crc")
            if version % 10 == 5:
                link(snapshot, folder / f"{version}.snapshot")
                link(snapshot.with_name(f".{snapshot.name}.crc"), folder / f".{version}.snapshot.crc")
    shutil.copytree(real / "_metadata", ckpt / "state" / "0" / "0" / "_metadata")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixture", default="agg_window_hdfs")
    parser.add_argument("--batches", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    fixture = ROOT / "fixtures" / args.fixture / "checkpoint"
    with tempfile.TemporaryDirectory() as tmp:
        build(fixture, Path(tmp), args.batches, args.partitions, args.versions)
        ckpt = str(Path(tmp) / "checkpoint")
        found = subprocess.run([sys.executable, "-m", "wmcheck.cli", "check", ckpt, "--format", "json"],
                               capture_output=True, text=True)
        findings = json.loads(found.stdout)
        base = median_seconds([sys.executable, "-c", "pass"], args.repeat)
        check = median_seconds([sys.executable, "-m", "wmcheck.cli", "check", ckpt], args.repeat)
        names = median_seconds([sys.executable, "-m", "wmcheck.cli", "check", "--no-content", ckpt], args.repeat)
        files = sum(len(f) for _, _, f in os.walk(ckpt))
    print(f"synthetic checkpoint: {args.batches} batches, {args.partitions} partitions x {args.versions} state "
          f"versions, {files} files (from fixture {args.fixture}); findings: {len(findings)}")
    print(f"{'command':<20} {'wall s':>8} {'x python':>9} {'cpu s':>8} {'x python':>9}")
    for name, (wall, cpu) in (("python -c pass", base), ("check --no-content", names), ("wmcheck check", check)):
        print(f"{name:<20} {wall:>8.3f} {wall / base[0]:>9.1f} {cpu:>8.3f} {cpu / base[1]:>9.1f}")
    print(f"target: <= 3 s wall with state contents decoded, <= 2 s by names: "
          f"{'met' if check[0] <= 3 and names[0] <= 2 else 'MISSED'} (load average now: "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; cpu s is what the run itself used)")


if __name__ == "__main__":
    main()
