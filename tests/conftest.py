"""Shared test helpers: fixture and corpus locations, a CLI runner that forbids tracebacks."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kafka_env import kafka_bootstrap, spark_kafka, spark_kafka_delta  # noqa: F401  (the broker and Spark's Kafka connector, for every test)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
CORPUS = ROOT.parent / "shared" / "spark-checkpoints"


def fixture_names() -> list[str]:
    """Every generated fixture (a directory with fixture.json)."""
    return sorted(p.parent.name for p in FIXTURES.glob("*/fixture.json"))


def fixture_facts(name: str) -> dict:
    return json.loads((FIXTURES / name / "fixture.json").read_text())


def shown_name(facts: dict, op: dict) -> str:
    """The operator name wmcheck shows for one of ``fixture.json``'s operators: without operator metadata (Spark < 4.0)
    applyInPandasWithState's state reads as flatMapGroupsWithState's (the same schema), and the name is inferred."""
    name = op["operator_name"]
    return "flatMapGroupsWithState" if name == "applyInPandasWithState" and facts["spark_version"].startswith("3.") else name


def fixture_checkpoint(name: str) -> Path:
    return FIXTURES / name / "checkpoint"


def root_map(name: str) -> str:
    """``--path-map`` from where the fixture was generated (its logs name files there) to where it is now."""
    return f"{fixture_facts(name)['root']}={FIXTURES / name}"


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip("../shared/spark-checkpoints is not present")
    return CORPUS


def names_own_schemas(ckpt: Path) -> Path:
    """Make a copied checkpoint name its own state schema files (transformWithState records absolute
    ones) with ``wmcheck relocate``, leaving no backup behind; returns ``ckpt``."""
    from wmcheck.checkpoint import repair

    repair.run(str(ckpt), repair.RelocateRequest(), repair.RunOptions(execute=True, idle_ms=0))
    shutil.rmtree(ckpt / "_wmcheck", ignore_errors=True)
    return ckpt


def sink_at_home(root: Path, name: str) -> Path:
    """Make a copied fixture's logs name its own input and sink files (they name where it was generated) with
    ``wmcheck relocate --path-map``, leaving no backup behind; returns ``root``."""
    from wmcheck.checkpoint import repair

    old = fixture_facts(name)["root"]
    if old != str(root):
        sink = str(root / "output") if (root / "output" / "_spark_metadata").is_dir() else None  # not a foreachBatch's
        repair.run(str(root / "checkpoint"), repair.RelocateRequest(path_map={old: str(root)}, file_sink=sink),
                   repair.RunOptions(execute=True, idle_ms=0))
        shutil.rmtree(root / "checkpoint" / "_wmcheck", ignore_errors=True)
    return root


def last_batch_reads_input(ckpt: Path) -> bool:
    """Whether the checkpoint's last batch read input files (its file sources' ``logOffset`` moved): Spark asks the
    source for them again on restart, where they were logged."""
    from wmcheck.checkpoint.model import open_checkpoint

    opened = open_checkpoint(str(ckpt))
    last = opened.last_batch
    if not last:
        return False
    before = {s.source_id: s.log_offset for s in opened.offsets(last - 1).sources}
    return any(s.log_offset is not None and s.log_offset != before.get(s.source_id) for s in opened.offsets(last).sources)


def restartable_checkpoint(name: str, tmp_path: Path) -> Path:
    """The fixture's checkpoint as Spark can restart it wherever the repository is: in place, or for a
    fixture whose operator metadata names schema files where it was generated, a relocated copy; for one whose last
    batch read input files, a copy of the fixture whose logs name its own files."""
    ckpt = fixture_checkpoint(name)
    if last_batch_reads_input(ckpt):
        shutil.copytree(FIXTURES / name, tmp_path / name)
        return names_own_schemas(sink_at_home(tmp_path / name, name) / "checkpoint")
    if not any(ckpt.glob("state/*/_metadata/v2/*")):
        return ckpt
    shutil.copytree(ckpt, tmp_path / name / "checkpoint")
    return names_own_schemas(tmp_path / name / "checkpoint")


@pytest.fixture
def copy_fixture(tmp_path):
    """Copy a fixture directory (checkpoint, input, output) to tmp_path and return the copy."""

    def copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(FIXTURES / name, dst)
        return dst

    return copy


def age(root: Path, when: int = 1_000_000_000) -> None:
    """Give every entry under ``root`` an old modification time, as a query stopped long ago left them."""
    for path in root.rglob("*"):
        os.utime(path, (when, when), follow_symlinks=False)


def run_cli(*args: str, exit_code: int | None = 0) -> Result:
    """Run ``wmcheck`` in-process; assert the exit code (any when None) and that no traceback escaped."""
    from wmcheck.cli.main import cli

    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=True)
    assert "Traceback" not in result.output, result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"exception escaped: {result.exception!r}\n{result.output}")
    assert exit_code is None or result.exit_code == exit_code, f"exit {result.exit_code} != {exit_code}\n{result.output}"
    return result


@pytest.fixture(scope="session")
def spark_event_log(tmp_path_factory) -> Path:
    """Where the session's Spark writes its event log (one plain file): the plans of every batch a test's query runs."""
    return tmp_path_factory.mktemp("eventlog")


@pytest.fixture(scope="session")
def spark(spark_event_log):
    """One real local Spark session for the whole test run, writing its event log to ``spark_event_log``."""
    pytest.importorskip("pyspark")
    from wmcheck.statestore.spark.session import spark_session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python workers (pandas UDFs) run in this environment

    session = spark_session(master="local[2]", conf={
        "spark.sql.shuffle.partitions": "3", "spark.eventLog.enabled": "true", "spark.eventLog.dir": str(spark_event_log),
        "spark.eventLog.rolling.enabled": "false", "spark.eventLog.compress": "false"})
    yield session
    session.stop()
