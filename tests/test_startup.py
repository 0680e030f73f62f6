"""What ``wmcheck show`` and ``wmcheck --help`` import (their start-up time, bench/bench_cli.py): the modules of what
they do not do are left to the commands that do it, so that a new import at module level cannot slow them silently."""
from __future__ import annotations

import subprocess
import sys

from conftest import fixture_checkpoint

SHOW_SKIPS = (
    # the state files' content readers (show reads their names only): rows, keys, join rows, RocksDB table runs
    "wmcheck.statestore.keys.partitions", "wmcheck.statestore.keys.stale_columns",
    "wmcheck.statestore.encodings.join_rows", "wmcheck.statestore.rocksdb.sst_columns",
    # a Delta sink's effect, a Delta source table, the broker's topics, Kafka retention (check's options, replay's)
    "wmcheck.checkpoint.sinks", "wmcheck.checkpoint.sinks.delta", "wmcheck.checkpoint.sources.delta_table",
    "wmcheck.checkpoint.sources.kafka_topics", "wmcheck.checkpoint.kafka_retention",
    # the repair planners (show's findings name their requests only)
    "wmcheck.checkpoint.repair.rewind", "wmcheck.checkpoint.repair.execute", "wmcheck.checkpoint.repair.backup",
)
SHOW_MODULES = 126
"""wmcheck's modules ``show`` of a fixture imports (at most; the kinds of source every offset is read by are 8 of them:
checkpoint/sources/'s package, protocol, registry and a module per kind, and logs/log_kinds.py, which they read by)."""
HELP_MODULES = ["wmcheck", "wmcheck.checkpoint", "wmcheck.checkpoint.errors", "wmcheck.checkpoint.records", "wmcheck.cli", "wmcheck.cli.commands",
                "wmcheck.cli.flags", "wmcheck.cli.main", "wmcheck.cli.process", "wmcheck.cli.text"]


def imported(*args: str) -> list[str]:
    """The modules a new process has imported after running ``wmcheck ARGS``."""
    code = ("import sys; from wmcheck.cli.main import cli\n"
            f"try:\n    cli({list(args)!r})\nexcept SystemExit:\n    pass\n"
            "print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[-1].split()


def test_show_imports_no_content_reader_delta_kafka_or_planner():
    modules = imported("show", str(fixture_checkpoint("agg_window_hdfs")))
    assert "wmcheck.checkpoint.checks.registry" in modules  # check's checks ran
    assert [m for m in SHOW_SKIPS if m in modules] == []
    assert len([m for m in modules if m.split(".")[0] == "wmcheck"]) <= SHOW_MODULES


SHOW_MADE = 55
"""Of the dataclasses of the modules ``show`` imports, how many it makes (at most; checkpoint/records.py defers the
rest)."""


def test_show_makes_the_dataclasses_it_uses_alone():
    code = ("import sys; from wmcheck.cli.main import cli\n"
            f"try:\n    cli(['show', {str(fixture_checkpoint('agg_window_hdfs'))!r}])\nexcept SystemExit:\n    pass\n"
            "classes = [v for n, m in list(sys.modules.items()) if n.startswith('wmcheck') for v in vars(m).values()\n"
            "           if isinstance(v, type) and v.__module__ == n and '__dataclass_fields__' in v.__dict__]\n"
            "print(sum('__wmcheck_dataclass__' not in c.__dict__ for c in classes), len(classes))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    made, defined = map(int, out.strip().splitlines()[-1].split())
    assert defined > 90 and made <= SHOW_MADE


def test_check_imports_the_content_readers_it_uses():
    modules = imported("check", str(fixture_checkpoint("agg_window_hdfs")))
    assert "wmcheck.statestore.keys.partitions" in modules and "wmcheck.statestore.keys.stale_columns" in modules
    assert "numpy" not in modules  # small state files are read by the references (COLUMNAR_BYTES)


def test_help_imports_the_command_group_alone():
    modules = imported("--help")
    assert [m for m in modules if m.split(".")[0] == "wmcheck"] == HELP_MODULES
    assert [m for m in modules if m.split(".")[0] in ("tabulate", "json", "pyarrow", "numpy")] == []
