"""Which batches a rewind can make the last one, proven by restarts: Spark restarting with ``offsets/L`` as the last
offsets file reads ``offsets/L-1`` too (where batch L started) and fails without it; batch 0 reads none. The oldest
target the planner accepts restarts as the control run does; the one before it, rewound anyway, fails in Spark.
(7 restarts in one child process: ~2 min on a loaded machine.)"""
from __future__ import annotations

from pathlib import Path

import pytest

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.model import Checkpoint

from conftest import run_cli
from restart_oracle import observed, prepare, restart_all

pytestmark = [pytest.mark.spark, pytest.mark.oracle]

COMPACTION, DEDUP = "compaction", "dedup_rocksdb_p3"  # offsets/10..12 kept; offsets/0..3 kept
BATCH_GONE = "batch {} doesn't exist"


def rewind(root: Path, *args: str) -> None:
    """``wmcheck rewind`` with the sink, executed, as a user runs it."""
    run_cli("rewind", root / "checkpoint", *args, "--file-sink", root / "output", "--execute", "--idle", "0")


def refusal(root: Path, batch: int) -> str:
    return run_cli("rewind", root / "checkpoint", "--to-batch", str(batch), "--idle", "0", exit_code=2).output


def rewound_anyway(root: Path, batch: int) -> None:
    """The rewind to ``batch`` as the planner made it before it knew Spark's rule (the rule switched off)."""
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(Checkpoint, "start_offsets_missing", lambda self, last: None)
        repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=batch, file_sink=str(root / "output")),
                   repair.RunOptions(execute=True, idle_ms=0))


@pytest.fixture(scope="module")
def restarts(tmp_path_factory):
    work = tmp_path_factory.mktemp("rewind-targets")
    cases: dict[str, tuple[str, Path]] = {}
    refused: dict[str, str] = {}

    def copy(name: str, key: str) -> Path:
        cases[key] = (name, prepare(name, work / key))
        return cases[key][1]

    copy(COMPACTION, "compaction-control")
    rewind(copy(COMPACTION, "compaction-to-11"), "--to-batch", "11")
    rewind(copy(COMPACTION, "compaction-to-10-keeping-offsets-11"), "--to-batch", "10", "--keep-next-offsets")
    root = copy(COMPACTION, "compaction-to-10")
    refused["compaction-to-10"] = refusal(root, 10)
    rewound_anyway(root, 10)
    copy(DEDUP, "dedup-control")
    rewind(copy(DEDUP, "dedup-to-0"), "--to-batch", "0")
    root = copy(DEDUP, "dedup-to-1-without-offsets-0")
    for name in ("0", ".0.crc"):
        (root / "checkpoint" / "offsets" / name).unlink()  # what a retention of 3 batches leaves
    refused["dedup-to-1-without-offsets-0"] = refusal(root, 1)
    rewound_anyway(root, 1)
    return restart_all(cases), refused


@pytest.mark.parametrize("key, control", [("compaction-to-11", "compaction-control"),
                                          ("compaction-to-10-keeping-offsets-11", "compaction-control"),
                                          ("dedup-to-0", "dedup-control")])
def test_the_oldest_accepted_target_restarts_as_the_control_run(restarts, key, control):
    outcomes, _ = restarts
    assert observed(outcomes[key], outcomes[control]) == "ok", (outcomes[key].error, outcomes[key].read_error)
    assert outcomes[key].batches[0] == {"compaction-to-11": 12, "compaction-to-10-keeping-offsets-11": 11,
                                        "dedup-to-0": 1}[key]  # the first batch after the target re-runs


@pytest.mark.parametrize("key, batch, oldest", [("compaction-to-10", 10, 11), ("dedup-to-1-without-offsets-0", 1, 2)])
def test_the_refused_target_fails_in_spark(restarts, key, batch, oldest):
    outcomes, refused = restarts
    assert refused[key] == (
        f"Error: cannot rewind to batch {batch}: offsets/{batch - 1} no longer exists: Spark restarting with "
        f"offsets/{batch} as the last offsets file reads it as where batch {batch} started, and fails "
        f"('{BATCH_GONE.format(batch - 1)}'); with --keep-next-offsets it reads offsets/{batch} instead "
        f"(hint: the oldest batch this checkpoint can be rewound to is {oldest})\n")
    assert outcomes[key].failed and BATCH_GONE.format(batch - 1) in outcomes[key].error, outcomes[key].error
