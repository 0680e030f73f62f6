"""The restart oracle: what real Spark does when a fixture's own query restarts from a (broken) copy of its checkpoint.

``prepare(name, dst)`` copies a fixture so that Spark can restart it there (its logged paths relocated to the
copy, input mtimes fixed) and adds one new input file (to the first source of a two-source fixture), so every
restart runs at least one new batch. ``restart_all(cases)`` restarts many copies in ONE child process with one
Spark session (``python restart_oracle.py CASES.json OUT.json``; ``python`` picks the interpreter, and with it
the Spark version) and returns per case what happened: the error Spark failed with, or the batches it ran, their
watermarks and the file sink's rows as Spark reads them back.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from fixture_modules import fixture_module

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"


def extra_rows(index: int) -> str:
    """The rows of new input file ``index``: after every fixture row, so each advances the watermark and the
    restart emits new windows."""
    return f"a@{101 + 40 * index} b@{105 + 40 * index} c@{134 + 40 * index}"


QUERIES = fixture_module("queries.py")


EXTRA_V = {"state_types": 100, "state_types_rocksdb": 100, "avro_types_tws": 100}
"""The first ``v`` of the new rows where the fixture's query needs a small one (state_types casts ``v * -300`` to a
short; avro_types_tws writes ``v`` before 25 digits into a DECIMAL(38,10))."""


def add_input(folder: Path, index: int, start_v: int = 1000) -> Path:
    """Write new input file ``index`` (``extra_rows``, ``v`` from ``start_v``) into ``folder``, ordered after every
    fixture file."""
    path = folder / f"zz-extra-{index}.json"
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in QUERIES._file(extra_rows(index), start_v)))
    mtime = QUERIES.input_mtime(9, index)
    os.utime(path, (mtime, mtime))
    return path


HELD = "held"
"""The input files of later rounds: ``held/<round>/`` of a copy, moved into the input before that round starts."""


def input_folder(name: str, root: Path) -> Path:
    """Where new input files go: the first source's folder of a two-source fixture."""
    return root.joinpath("input", *QUERIES.FIXTURES[name]["input_subdirs"][:1])


def prepare(name: str, dst: Path, extra: int = 1, rounds: int = 1) -> Path:
    """A restartable copy of fixture ``name`` at ``dst`` (checkpoint, input, output) with ``extra`` new input files
    (in the first source's folder of a two-source fixture); with ``rounds`` > 1, one more file per later round,
    held back in ``held/<round>/`` (the query restarts once per round, loading its state from the files)."""
    from conftest import sink_at_home

    shutil.copytree(FIXTURES / name, dst, ignore=shutil.ignore_patterns("fixture.json"))
    sink_at_home(dst, name)
    QUERIES.set_input_mtimes(name, str(dst))
    folder = input_folder(name, dst)
    start_v = EXTRA_V.get(name, 1000)
    for index in range(extra):
        add_input(folder, index, start_v)
    for later in range(1, rounds):
        held = dst / HELD / str(later)
        held.mkdir(parents=True)
        path = add_input(folder, extra + later - 1, start_v)
        shutil.copy2(path, held / path.name)
        path.unlink()
    return dst


@dataclass(frozen=True)
class Outcome:
    """What one restart did: ``error`` (Spark's message) when it failed, else the batches it ran and the
    watermark each ran with (its progress report's ``eventTime.watermark``, None when absent); ``rows`` is the
    sink's content read back through its log (None when reading it failed: ``read_error``)."""

    error: str | None
    batches: tuple[int, ...]
    watermarks: tuple[str | None, ...]
    rows: tuple[tuple[str, ...], ...] | None
    read_error: str | None

    @property
    def failed(self) -> bool:
        return self.error is not None


def observed(outcome: Outcome, reference: Outcome) -> str:
    """What Spark did: ``fails``, restarted with output other than the reference (``wrong``), or correctly (``ok``)."""
    if outcome.failed:
        return "fails"
    return "ok" if outcome.rows == reference.rows and outcome.read_error is None else "wrong"


def read_only(command: list[str], dirs: Sequence[Path]) -> list[str]:
    """``command`` run in a mount namespace of its own where each of ``dirs`` is a read-only bind mount of itself
    (as root: a read-only mount is what the process cannot write, whoever it runs as)."""
    if not dirs:
        return command
    mounts = " && ".join(f"mount --bind {shlex.quote(str(d))} {shlex.quote(str(d))} && "
                         f"mount -o remount,bind,ro {shlex.quote(str(d))}" for d in dirs)
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{mounts} && exec "$@"', "sh", *command]


def restart_all(cases: dict[str, tuple[str, Path]], timeout: float | None = None, python: str = sys.executable,
                read_only_dirs: Sequence[Path] = ()) -> dict[str, Outcome]:
    """Restart every case (key -> (fixture name, copy root)) in one child process of ``python``, ``read_only_dirs``
    mounted read-only for it; outcomes by key. A copy with held-back input (``prepare(rounds=...)``) restarts once
    per round. ``timeout``: by default 900 s, or 4 s per case where there are more (the whole oracle's 660 restarts
    take about 900 s on 2 busy cores: a limit by their number, not by an idle machine's time)."""
    timeout = timeout if timeout is not None else max(900.0, 4.0 * len(cases))
    work = Path(next(iter(cases.values()))[1]).parent
    spec, out = work / "oracle-cases.json", work / "oracle-outcomes.json"
    spec.write_text(json.dumps({k: [n, str(p)] for k, (n, p) in cases.items()}))
    started = time.monotonic()
    done = subprocess.run(read_only([python, str(Path(__file__)), str(spec), str(out)], read_only_dirs),
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(f"the restart oracle failed:\n{done.stderr[-4000:]}")
    raw = json.loads(out.read_text())
    print(f"restart oracle: {len(cases)} restarts in {time.monotonic() - started:.0f} s")
    return {k: Outcome(v["error"], tuple(v["batches"]), tuple(v["watermarks"]), None if v["rows"] is None else tuple(map(tuple, v["rows"])),
                       v["read_error"]) for k, v in raw.items()}


def _message(exc: BaseException) -> str:
    """Spark's error with the messages of its JVM causes (the root cause often names the real problem)."""
    text, java = str(exc), getattr(exc, "_origin", None) or getattr(exc, "java_exception", None)
    try:
        cause = java.getCause() if java is not None else None
        while cause is not None:
            text += f"\ncaused by: {cause.toString()}"
            cause = cause.getCause()
    except Exception:  # noqa: BLE001 - the causes are a bonus
        pass
    return text


def _run(session, name: str, root: Path, result: dict, query=None) -> None:
    """Start the fixture's query (or ``query``, of the same signature) on ``root`` once and wait for it; what it did
    goes into ``result``."""
    try:
        handle = (query or QUERIES.FIXTURES[name]["query"])(session, str(root / "input"), str(root / "checkpoint"),
                                                             str(root / "output")).start()
        handle.awaitTermination(300)
        if handle.isActive:
            handle.stop()
            result["error"] = "the restart did not finish within 300 s"
        elif handle.exception() is not None:
            result["error"] = _message(handle.exception())
        progress = [json.loads(p.json) if hasattr(p, "json") else p for p in handle.recentProgress]  # 3.5: dicts
        result["batches"] += [p["batchId"] for p in progress]
        result["watermarks"] += [p.get("eventTime", {}).get("watermark") for p in progress]
    except Exception as exc:  # noqa: BLE001 - the oracle records every failure Spark reports
        result["error"] = _message(exc)


def _restart(spark, name: str, root: Path, query=None, conf=None) -> dict:
    """Restart fixture ``name``'s query (or ``query``, in a session with the SQL ``conf`` too) at ``root``."""
    session = QUERIES.session_for(spark, name)
    for key, value in (conf or {}).items():
        session.conf.set(key, value)
    result: dict = {"error": None, "batches": [], "watermarks": [], "rows": None, "read_error": None}
    _run(session, name, root, result, query)
    held = sorted((root / HELD).iterdir(), key=lambda p: int(p.name)) if (root / HELD).is_dir() else []
    for later in held:
        if result["error"] is not None:
            break
        for path in later.iterdir():
            shutil.move(str(path), input_folder(name, root) / path.name)
        later.rmdir()
        _run(session, name, root, result, query)
    try:
        fmt = QUERIES.FIXTURES[name]["sink_format"]
        rows = session.read.format(fmt).load(str(root / "output")).collect()
        result["rows"] = sorted([str(v) for v in r] for r in rows)
    except Exception as exc:  # noqa: BLE001
        result["read_error"] = _message(exc)
    return result


def main(spec_path: str, out_path: str) -> None:
    sys.path.insert(0, str(HERE.parent))
    from wmcheck.statestore.spark.session import spark_session

    cases = json.loads(Path(spec_path).read_text())
    os.environ["PYSPARK_PYTHON"] = sys.executable  # pandas UDF workers run this interpreter, as the generator's did
    spark = spark_session(master="local[2]")
    try:
        outcomes = {key: _restart(spark, name, Path(root)) for key, (name, root) in cases.items()}
    finally:
        spark.stop()
    Path(out_path).write_text(json.dumps(outcomes))


if __name__ == "__main__":
    main(*sys.argv[1:3])
