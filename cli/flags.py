"""The command line's flag for each library parameter that messages name (``arg`` placeholders): one table,
applied wherever library text reaches the user (the error line in main, everything ``Output`` writes)."""
from __future__ import annotations

from wmcheck.checkpoint.errors import spelled

FLAGS = {
    "allow_raise": "--allow-raise",
    "backup_dir": "--backup-dir",
    "baseline": "--baseline-query",
    "batch": "--batch",
    "bootstrap_server": "--bootstrap-server",
    "by_duration": "--by-duration",
    "conf": "--conf",
    "debug": "--debug",
    "delta_sink": "--delta-sink",
    "delta_source": "--delta-source",
    "delta_starting_version": "--delta-starting-version",
    "delta_txn_app_id": "--delta-txn-app-id",
    "end": "--to",
    "engine": "--engine",
    "event_time": "--event-time",
    "execute": "--execute",
    "export": "--export",
    "file_sink": "--file-sink",
    "force": "--force",
    "foreach_batch": "--foreach-batch",
    "from_file": "--from-file",
    "from_plan": "--from-plan",
    "fs_options": "--fs-option",
    "idle_ms": "--idle",
    "include_pending": "--include-pending",
    "inputs": "--input",
    "next_inputs": "--next-input",
    "jars": "--jars",
    "jobs": "--jobs",
    "join_side": "--join-side",
    "kafka_option": "--kafka-option",
    "subscribe_pattern": "--subscribe-pattern",
    "kafka_sink": "--kafka-sink",
    "keep_next_offsets": "--keep-next-offsets",
    "keep_source_log": "--keep-source-log",
    "last": "--last",
    "lateness": "--lateness",
    "master": "--master",
    "max_memory": "--max-memory",
    "operator": "--operator",
    "operator_lag": "--operator-lag",
    "options": "--option",
    "output": "--output",
    "overwrite": "--overwrite",
    "packages": "--packages",
    "partitions": "--partitions",
    "path_map": "--path-map",
    "plan": "--plan",
    "plan_out": "--plan-out",
    "progress": "--progress",
    "query": "--query",
    "remote": "--remote",
    "schema": "--schema",
    "shift": "--shift",
    "shift_by": "--shift-by",
    "skip_missing": "--skip-missing",
    "source": "--source",
    "source_format": "--source-format",
    "start": "--from",
    "state_var": "--state-var",
    "store": "--store",
    "timeout": "--timeout",
    "timeout_s": "--batch-timeout",
    "to_batch": "--to-batch",
    "to_datetime": "--to-datetime",
    "to_earliest": "--to-earliest",
    "to_latest": "--to-latest",
    "to_offset": "--to-offset",
    "to_time": "--to-time",
    "to_watermark": "--to-watermark",
    "topic": "--topic",
    "tz": "--tz",
    "watermark": "--watermark",
    "watermark_ms": "--watermark",
    "window": "--window",
}


def cli_spelling(name: str, value: str | None) -> str:
    """A parameter as the command line takes it: ``--flag`` or ``--flag VALUE``."""
    flag = FLAGS.get(name) or "--" + name.replace("_", "-")
    return flag if value is None else f"{flag} {value}"


def for_cli(text: str) -> str:
    """Library text with its parameters named by their flags."""
    return spelled(text, cli_spelling)
