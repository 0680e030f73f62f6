"""The compat matrix against real Spark, in ONE child process with one Spark session
(``python compat_oracle.py CASES.json OUT.json``; ``run(names, work)`` starts it and returns the outcomes).

Per case of tests/compat_cases.py, on copies of its fixture (tests/restart_oracle.prepare):

* ``compat``: ``wmcheck compat`` (the library) with the new code given as ``module.py:new_query``; its report as
  JSON, the rows its scratch copy holds for the re-run batch, and whether every file of the copy it was given
  (checkpoint, input, output) is byte for byte what it was.
* ``restart``: the new code restarted for real on a copy with one new input file: Spark's error, or the batches.
* ``rewound``: when it restarts, the new code restarted on a copy rewound (``wmcheck rewind``, keeping the next
  offsets and the source log) to the batch before the one compat re-ran (not rewound when compat ran the batch a
  restart plans next): that batch's rows as Spark wrote them.
* ``old``: the rows the fixture's old code wrote for that batch.

Rows are JSON strings (``to_json`` of each row), sorted.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, is_dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULE = """import sys
sys.path[:0] = [{tests!r}]
from compat_cases import CASES

def new_query(spark):
    return CASES[{name!r}].query(spark, {input!r}, {checkpoint!r}, {output!r})
"""


def run(names: list[str], work: Path, timeout: float = 1800) -> dict:
    """Run the named cases in one child process; outcomes by name."""
    spec, out = work / "compat-cases.json", work / "compat-outcomes.json"
    spec.write_text(json.dumps({"names": names, "work": str(work)}))
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(Path(__file__)), str(spec), str(out)], capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(f"the compat oracle failed:\n{done.stderr[-6000:]}")
    print(f"compat oracle: {len(names)} cases in {time.monotonic() - started:.0f} s")
    return json.loads(out.read_text())


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def _plain(value):
    if is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in asdict(value).items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _json_rows(df) -> list[str]:
    from pyspark.sql import functions as F

    return sorted(r[0] for r in df.select(F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns]))).collect())


def sink_rows(spark, sink: Path, batch: int, fmt: str, like) -> list[str] | None:
    """The rows a file sink's log says ``batch`` wrote (None: no entry); text formats read with ``like``'s schema."""
    from wmcheck.checkpoint.fs import open_fs
    from wmcheck.statestore.spark.compat.compare import read_files, sink_batch_files

    files = sink_batch_files(open_fs(str(sink)), batch)
    return None if files is None else _json_rows(read_files(spark, fmt, files, like))


def batch_file_rows(output: Path, batch: int) -> list[str] | None:
    """The rows a foreachBatch writer of the fixtures wrote for ``batch`` (``batch-NNNNNN.json``)."""
    path = output / f"batch-{batch:06d}.json"
    return sorted(line for line in path.read_text().splitlines() if line) if path.exists() else None


def _rows(spark, root: Path, fixture: str, batch: int, like, spec) -> list[str] | None:
    if spec["sink"] == "foreachBatch":
        return batch_file_rows(root / "output", batch)
    return sink_rows(spark, root / "output", batch, spec["sink_format"], like)


def crash_in_last_data_batch(root: Path, sink: bool) -> None:
    """Make the last batch that read input planned but not committed, as a crash in it leaves the checkpoint:
    ``wmcheck rewind`` to the batch before, keeping its offsets file."""
    from wmcheck.checkpoint import repair
    from wmcheck.checkpoint.model import open_checkpoint
    from wmcheck.statestore.spark.compat.scratch import rerun_batch

    batch, _ = rerun_batch(open_checkpoint(str(root / "checkpoint")))
    repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=batch - 1, keep_next_offsets=True,
                                                              file_sink=str(root / "output") if sink else None),
               repair.RunOptions(execute=True, idle_ms=0))
    shutil.rmtree(root / "checkpoint" / "_wmcheck")


def _copy(case, path: Path, extra: int) -> Path:
    from restart_oracle import QUERIES, prepare

    root = prepare(case.fixture, path, extra=extra)
    if case.pending:
        crash_in_last_data_batch(root, QUERIES.FIXTURES[case.fixture]["sink"] != "foreachBatch")
    return root


def _case(spark, name: str, work: Path) -> dict:
    from compat_cases import CASES

    from wmcheck.checkpoint import repair
    from wmcheck.statestore.spark.compat import CompatOptions, compat

    import restart_oracle
    from restart_oracle import QUERIES

    case = CASES[name]
    spec = QUERIES.FIXTURES[case.fixture]
    base = work / name
    a = _copy(case, base / "a", extra=0)
    before = digest(a)
    module = base / "new_code.py"
    module.write_text(MODULE.format(tests=str(HERE), name=name, input=str(a / "input"), checkpoint=str(a / "checkpoint"),
                                    output=str(a / "output")))
    session = QUERIES.session_for(spark, case.fixture)
    for key, value in case.conf.items():
        session.conf.set(key, value)
    scratch = base / "scratch"
    scratch.mkdir()
    inputs = {}
    for sid, pattern in case.inputs.items():  # the rows a source read in the batch, as files
        inputs[sid] = str(base / "inputs" / sid)
        os.makedirs(inputs[sid])
        for path in sorted(a.glob(pattern)):
            shutil.copy(path, inputs[sid])
    out: dict = {"compat": None, "compat_error": None}
    started = time.monotonic()
    try:
        report = compat(session, str(a / "checkpoint"), f"{module}:new_query",
                        CompatOptions(scratch_dir=str(scratch), keep_scratch=True, inputs=inputs))
        out["compat"] = _plain(report)
        out["changes"] = report.changes
        out["exit_code"] = report.exit_code()
    except Exception as exc:  # noqa: BLE001 - recorded for the test to show
        out["compat_error"] = f"{type(exc).__name__}: {exc}"
    out["compat_seconds"] = time.monotonic() - started
    out["unchanged"] = digest(a) == before
    batch = out["compat"]["batch"] if out["compat"] else None
    like = CASES[name].query(session, str(a / "input"), str(a / "checkpoint"), str(a / "output"))
    like = getattr(like, "_df", like)
    if out["compat"] and out["compat"]["verdict"] == "restarts":
        root = next(scratch.iterdir())
        if (root / "sink").exists():
            out["compat_rows"] = sink_rows(session, root / "sink", batch, spec["sink_format"], like)
        else:
            captured = root / "captured"
            out["compat_rows"] = _json_rows(session.read.parquet(str(captured))) if captured.exists() else []
        out["old"] = _rows(session, a, case.fixture, batch, like, spec)
    started = time.monotonic()
    b = _copy(case, base / "b", extra=1)
    out["restart"] = restart_oracle._restart(spark, case.fixture, b, case.query, case.conf)
    out["restart"].pop("rows", None)
    if out["restart"]["error"] is None and batch is not None:
        c = _copy(case, base / "c", extra=0)
        sink = str(c / "output") if spec["sink"] != "foreachBatch" else None
        if out["compat"]["how"] != "next":  # else the copy restarts as it is: the batch a restart plans next
            repair.run(str(c / "checkpoint"), repair.RewindRequest(to_batch=batch - 1, keep_next_offsets=True,
                                                                     keep_source_log=True, file_sink=sink),
                       repair.RunOptions(execute=True, idle_ms=0))
        if spec["sink"] == "foreachBatch":
            for stale in (c / "output").glob("batch-*.json"):
                if int(stale.stem.split("-")[1]) >= batch:
                    stale.unlink()
        rewound = restart_oracle._restart(spark, case.fixture, c, case.query, case.conf)
        out["rewound_error"] = rewound["error"]
        out["rewound_batches"] = rewound["batches"]
        out["rewound_rows"] = _rows(session, c, case.fixture, batch, like, spec)
    out["oracle_seconds"] = time.monotonic() - started
    shutil.rmtree(base, ignore_errors=True)
    return out


def main(spec_path: str, out_path: str) -> None:
    sys.path[:0] = [str(HERE), str(HERE.parent)]
    from wmcheck.statestore.spark.session import spark_session

    spec = json.loads(Path(spec_path).read_text())
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = spark_session(master="local[2]")
    outcomes = {}
    try:
        for name in spec["names"]:
            try:
                outcomes[name] = _case(spark, name, Path(spec["work"]))
            except Exception as exc:  # noqa: BLE001 - one broken case must not hide the others
                outcomes[name] = {"oracle_error": f"{type(exc).__name__}: {exc}"}
            Path(out_path).write_text(json.dumps(outcomes))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:3])
