"""Every command in one table: where it lives, its line in ``wmcheck --help`` and whether it needs Spark, as the
README's table of commands says (tests/test_help.py holds the two together)."""
from __future__ import annotations

from wmcheck.checkpoint.records import dataclass


@dataclass(frozen=True)
class Command:
    """A subcommand: ``module``.``attr`` is its click command (imported on first use)."""

    module: str
    attr: str
    summary: str
    """Its line in ``wmcheck --help``: what it does, and ``needs Spark`` when it does."""
    spark: str
    """Whether it needs Spark: the README's "needs Spark" cell, word for word."""


COMMANDS = {
    "show": Command("wmcheck.cli.show", "show", "Summarise a checkpoint: batches, watermark, sources, state.", "no"),
    "batches": Command("wmcheck.cli.batches", "batches", "One row per batch: watermark, timestamp, offsets.", "no"),
    "check": Command("wmcheck.cli.check", "check", "Validate checkpoints (for CI and before a restart).", "no"),
    "rewind": Command("wmcheck.cli.repair", "rewind", "Roll a checkpoint back to an earlier batch (dry run by default).", "no"),
    "set-watermark": Command("wmcheck.cli.repair", "set_watermark", "Set the watermark the next batch starts from.", "no"),
    "relocate": Command("wmcheck.cli.repair", "relocate",
                        "Make a copied or moved checkpoint name its own files (schema files, logged paths).", "no"),
    "repartition": Command("wmcheck.cli.repartition", "repartition", "Change a stateful query's partitions with Spark's "
                           "repartition (dry run by default; needs Spark to run).", "yes (not for the plan)"),
    "reset-offsets": Command("wmcheck.cli.reset_offsets", "reset_offsets", "Start a Kafka source at other offsets, like "
                             "kafka-consumer-groups --reset-offsets (dry run by default).", "no"),
    "undo": Command("wmcheck.cli.repair", "undo", "Restore a checkpoint from a wmcheck backup.", "no"),
    "backups": Command("wmcheck.cli.repair", "backups", "List the backups wmcheck made of a checkpoint.", "no"),
    "state": Command("wmcheck.cli.state", "state", "State keys and their age against the watermark (no JVM needed; "
                     "Spark's reader with --engine spark).",
                     "no (`--engine python`, the default when it reads every store), or Spark's reader"),
    "replay": Command("wmcheck.cli.replay", "replay", "Rebuild and reprocess the input of recorded batches (needs Spark; "
                      "--plan does not).", "yes (not for `--plan`)"),
    "timeline": Command("wmcheck.cli.timeline", "timeline_command", "Draw a query over its batches (HTML, PNG or SVG).", "no"),
    "compat": Command("wmcheck.cli.compat", "compat", "Will new query code restart on a checkpoint, and what will it change? "
                      "(needs Spark)", "yes"),
}
