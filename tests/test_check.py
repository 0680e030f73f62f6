"""``wmcheck check``: every check on a real fixture broken the way the check describes, in every format."""
from __future__ import annotations

import csv
import io
import json
import os
import shlex
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from xml.etree import ElementTree as ET

import pytest
from test_row_checksums import _lz4_raw

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.checks.definition import Fix, Instruction
from wmcheck.checkpoint.checks.sources import misspelled
from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.fs import open_fs
from wmcheck.checkpoint.locations import LISTED_FROM, present_files
from wmcheck.checkpoint.model import open_checkpoint, store_unique_ids
from wmcheck.checkpoint.offsets import parse_offsets
from wmcheck.checkpoint.plans import PASSES, BatchPlan, PlanNode, PlanOperator
from wmcheck.checkpoint.progress import QueryProgress
from wmcheck.checkpoint.state_codecs import decompress
from wmcheck.checkpoint.state_records import DELETE, sized_records
from wmcheck.checkpoint.validate import CHECKS, check_checkpoint

from conftest import fixture_facts, names_own_schemas, run_cli, sink_at_home
from oracle_cases import (
    data_files_of,
    entry_made_a_directory,
    logged_input,
    newest_state_back,
    partition_files_of,
    state_file_of,
)
from restart_oracle import FIXTURES

DAY_MS = 86_400_000


# -- breaking files the way people and crashes do ----------------------------------------------------


def sidecars(path: Path) -> list[Path]:
    """A file's Hadoop and Spark checksum files (and the Hadoop one of Spark's)."""
    spark = path.with_name(f"{path.name}.crc")
    return [path.with_name(f".{path.name}.crc"), spark, spark.with_name(f".{spark.name}.crc")]


def drop(path: Path) -> None:
    """Delete a file with its checksum sidecars."""
    for p in [path, *sidecars(path)]:
        p.unlink(missing_ok=True)


def hand_edit(path: Path, data: bytes) -> None:
    """Rewrite a file by hand: new bytes, no checksum sidecar."""
    drop(path)
    path.write_bytes(data)


def edit_json(path: Path, line: int, change: Callable[[dict], None]) -> None:
    """Change the JSON object on ``line`` (0-based) of a log file, written compactly as Spark does."""
    lines = path.read_text().split("\n")
    obj = json.loads(lines[line])
    change(obj)
    lines[line] = json.dumps(obj, separators=(",", ":"))
    hand_edit(path, "\n".join(lines).encode())


def flip_byte(path: Path) -> None:
    """Corrupt one byte of a file in place, keeping its (now stale) checksum."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def set_watermark(ckpt: Path, batch: int, offsets_ms: int | None = None, commit_ms: int | None = None) -> None:
    if offsets_ms is not None:
        edit_json(ckpt / "offsets" / str(batch), 1, lambda o: o.update(batchWatermarkMs=offsets_ms))
    if commit_ms is not None:
        edit_json(ckpt / "commits" / str(batch), 1, lambda o: o.update(nextBatchWatermarkMs=commit_ms))


def offsets_meta(ckpt: Path, batch: int) -> dict:
    return json.loads((ckpt / "offsets" / str(batch)).read_text().split("\n")[1])


def log_file(folder: Path, batch: int) -> Path:
    """``N`` or ``N.compact`` of a file log."""
    plain = folder / str(batch)
    return plain if plain.exists() else folder / f"{batch}.compact"


# -- one case per check ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Break:
    """How to break a copy of ``fixture`` so that check ``code`` reports ``path`` (returned by ``apply``)."""

    code: str
    fixture: str
    apply: Callable[[Path, dict], str]
    also: tuple[str, ...] = ()
    sink: bool = False
    text: str = ""  # returned by apply as "path|expected text" when set dynamically


def b_unparseable(root: Path, facts: dict) -> str:
    last = facts["last_batch"]
    hand_edit(root / "checkpoint" / "offsets" / str(last), b'v1\n{"batchWatermarkMs":1,"batchTimestampMs":2,"conf":{')
    return f"offsets/{last}"


def b_edit(root: Path, path: str, old: str, new: str) -> str:
    """A file of the checkpoint edited by hand (its sidecar left stale): its path shown by check."""
    target = root / path
    assert old in target.read_text(), (path, old)
    hand_edit(target, target.read_text().replace(old, new).encode())
    return path.removeprefix("checkpoint/")


def b_conf_value(root: Path, facts: dict, value: object) -> str:
    """A pinned conf value of the last offsets file written by hand as another JSON type than a string."""
    last = facts["last_batch"]
    path = root / "checkpoint" / "offsets" / str(last)
    lines = path.read_text().split("\n")
    meta = json.loads(lines[1])
    meta["conf"]["spark.sql.streaming.statefulOperator.useStrictDistribution"] = value
    hand_edit(path, "\n".join([lines[0], json.dumps(meta, separators=(",", ":")), *lines[2:]]).encode())
    return f"offsets/{last}"


def b_old_file_cut(folder: str, name: str) -> Callable[[Path, dict], str]:
    """A file Spark does not read on restart (an old offsets or commit file, a log file before its newest compact
    file) cut short."""

    def run(root: Path, facts: dict) -> str:
        path = root / folder / name
        hand_edit(path, path.read_bytes()[:30])
        return str(Path(folder).relative_to("checkpoint") / name) if folder.startswith("checkpoint") else f"../{folder}/{name}"

    return run


def b_offsets_gap(root: Path, facts: dict) -> str:
    """The batch before the last gone: Spark reads its offsets file on restart."""
    before = facts["last_batch"] - 1
    drop(root / "checkpoint" / "offsets" / str(before))
    drop(root / "checkpoint" / "commits" / str(before))
    return f"offsets/{before}"


def b_commits_gap(root: Path, facts: dict) -> str:
    drop(root / "checkpoint" / "commits" / "5")
    return "commits/5"


def b_commit_without_offsets(root: Path, facts: dict) -> str:
    last = facts["last_batch"]
    shutil.copyfile(root / "checkpoint" / "commits" / str(last), root / "checkpoint" / "commits" / str(last + 1))
    return f"commits/{last + 1}"


def b_uncommitted(root: Path, facts: dict) -> str:
    last = facts["last_batch"]
    drop(root / "checkpoint" / "commits" / str(last))
    drop(root / "checkpoint" / "commits" / str(last - 1))
    return f"offsets/{last - 1}"


def b_commit_version(root: Path, facts: dict) -> str:
    path = root / "checkpoint" / "commits" / str(facts["last_batch"])
    hand_edit(path, path.read_bytes().replace(b"v1\n", b"v2\n", 1))
    return f"commits/{facts['last_batch']}"


def b_metadata_missing(root: Path, facts: dict) -> str:
    drop(root / "checkpoint" / "metadata")
    return "metadata"


def b_metadata_invalid(root: Path, facts: dict) -> str:
    hand_edit(root / "checkpoint" / "metadata", b'{"id":"not-a-uuid"}')
    return "metadata"


def b_temp_file(root: Path, facts: dict) -> str:
    name = f".{facts['last_batch'] + 1}.5d2c1d5e-5c1f-4d6f-9b43-2f0a5e7c9d11.tmp"
    (root / "checkpoint" / "offsets" / name).write_bytes(b"v1\n")
    return f"offsets/{name}"


def b_orphan_crc(root: Path, facts: dict) -> str:
    shutil.copyfile(root / "checkpoint" / "commits" / ".0.crc", root / "checkpoint" / "commits" / ".99.crc")
    return "commits/.99.crc"


def watermarked(facts: dict) -> list[dict]:
    return [b for b in facts["batches"] if b["watermark_ms"] > 0]


def b_decreasing(root: Path, facts: dict) -> str:
    batch = watermarked(facts)[2]["batch"]
    lower = watermarked(facts)[1]["watermark_ms"] - 1000
    set_watermark(root / "checkpoint", batch, offsets_ms=lower)
    set_watermark(root / "checkpoint", batch - 1, commit_ms=lower)
    return f"offsets/{batch}"


def b_commit_vs_next(root: Path, facts: dict) -> str:
    batch = watermarked(facts)[0]["batch"]
    set_watermark(root / "checkpoint", batch, commit_ms=watermarked(facts)[0]["watermark_ms"] + 1)
    return f"commits/{batch}"


def b_future(root: Path, facts: dict) -> str:
    ckpt, last = root / "checkpoint", facts["last_batch"]
    future = offsets_meta(ckpt, last)["batchTimestampMs"] + 2 * DAY_MS
    set_watermark(ckpt, last, offsets_ms=future, commit_ms=future)
    set_watermark(ckpt, last - 1, commit_ms=future)
    return f"commits/{last - 1}"  # the first far-ahead watermark: batch 12 plans with it


def b_stuck(root: Path, facts: dict) -> str:
    ckpt = root / "checkpoint"
    for batch in facts["batches"]:
        set_watermark(ckpt, batch["batch"], offsets_ms=0, commit_ms=0)
    return f"offsets/{facts['last_batch']}"


def b_conf_drift(root: Path, facts: dict) -> str:
    """(Another shuffle partition count on a batch that reads no input is a repartition batch: WM018 then.)"""
    last = facts["last_batch"]
    edit_json(root / "checkpoint" / "offsets" / str(last), 1,
              lambda o: o["conf"].update({"spark.sql.streaming.aggregation.stateFormatVersion": "1"}))
    return f"offsets/{last}"


def b_conf_missing(root: Path, facts: dict) -> str:
    """The aggregation state format removed from the last offsets file: Spark's default for it is 1, not 2."""
    last = facts["last_batch"]
    edit_json(root / "checkpoint" / "offsets" / str(last), 1,
              lambda o: o["conf"].pop("spark.sql.streaming.aggregation.stateFormatVersion"))
    return f"offsets/{last}"


def b_conf_drift_unused(root: Path, facts: dict) -> str:
    """The join state format changed in the last offsets file of an aggregation: no operator uses it."""
    last = facts["last_batch"]
    edit_json(root / "checkpoint" / "offsets" / str(last), 1,
              lambda o: o["conf"].update({"spark.sql.streaming.join.stateFormatVersion": "1"}))
    return f"offsets/{last}"


def b_conf_refused(root: Path, facts: dict) -> str:
    """The join state format of the last offsets file of an aggregation set to 5: no operator uses it, but Spark 4.3
    refuses the value when it sets the conf on restart."""
    last = facts["last_batch"]
    edit_json(root / "checkpoint" / "offsets" / str(last), 1,
              lambda o: o["conf"].update({"spark.sql.streaming.join.stateFormatVersion": "5"}))
    return f"offsets/{last}"


def b_conf_refused_everywhere(root: Path, facts: dict) -> str:
    """A state store provider of another distribution in every offsets file (a checkpoint it wrote)."""
    for batch in range(facts["last_batch"] + 1):
        edit_json(root / "checkpoint" / "offsets" / str(batch), 1, lambda o: o["conf"].update(
            {"spark.sql.streaming.stateStore.providerClass": "com.databricks.sql.streaming.state.RocksDBStateStoreProvider"}))
    return f"offsets/{facts['last_batch']}"


def b_partitions_everywhere(root: Path, facts: dict) -> str:
    """Every offsets file pinning 2 shuffle partitions where the state was written in 3 (operator metadata and
    partition directories say so)."""
    for batch in range(facts["last_batch"] + 1):
        edit_json(root / "checkpoint" / "offsets" / str(batch), 1,
                  lambda o: o["conf"].update({"spark.sql.shuffle.partitions": "2"}))
    return f"offsets/{facts['last_batch']}"


def b_partitions_last(root: Path, facts: dict) -> str:
    """The last offsets file (a no-data batch, its state an ordinary batch's deltas: no repartition) pinning 2
    shuffle partitions instead of 3."""
    last = facts["last_batch"]
    edit_json(root / "checkpoint" / "offsets" / str(last), 1,
              lambda o: o["conf"].update({"spark.sql.shuffle.partitions": "2"}))
    return f"offsets/{last}"


def b_older_offsets_gap(root: Path) -> str:
    """offsets/5 deleted (its sidecar left): Spark reads only the last two offsets files on restart."""
    (root / "checkpoint" / "offsets" / "5").unlink()
    return "offsets/5"


def b_foreign_partition(root: Path, facts: dict) -> str:
    """Partition 0's state files replaced by partition 1's (a restore that mixed partitions up)."""
    partition_files_of(1, 0)(root)
    return "state/0/0/2.delta"  # 1.delta holds no row


def b_evicted_keys_loaded(root: Path, facts: dict) -> str:
    """Partition 0's 13.changelog (the removal of the window batch 12 evicted) replaced by partition 1's, which holds
    no row."""
    state_file_of("1/13.changelog", "0/13.changelog")(root)
    return "state/0/0"


def b_schema_of_another_aggregation(root: Path, facts: dict) -> str:
    """Operator 0's state schema replaced by the compaction fixture's aggregation's (its key: the window only)."""
    path = "state/0/0/_metadata/schema"
    hand_edit(root / "checkpoint" / path, (FIXTURES / "compaction" / "checkpoint" / path).read_bytes())
    return path


def b_commit_without_unique_ids(root: Path, facts: dict) -> str:
    """The newest commit of a checkpoint of format 2 without its stateUniqueIds (edited)."""
    last = facts["last_committed_batch"]
    edit_json(root / "checkpoint" / "commits" / str(last), 1, lambda o: o.pop("stateUniqueIds"))
    return f"commits/{last}"


def b_source_count(root: Path, facts: dict) -> str:
    """A blank line after the last offsets file's source offset: Spark reads it as a second source's offset."""
    path = root / "checkpoint" / "offsets" / str(facts["last_batch"])
    hand_edit(path, path.read_bytes() + b"\n\n")
    return f"offsets/{facts['last_batch']}"


def edit_operator_metadata(root: Path, change: Callable[[dict], None]) -> str:
    edit_json(root / "checkpoint" / "state" / "0" / "_metadata" / "metadata", 1, change)
    return "state/0/_metadata/metadata"


def b_metadata_partition_count(root: Path, facts: dict) -> str:
    """The operator metadata says 4 partitions; the offsets pin 3, which Spark runs with."""
    return edit_operator_metadata(root, lambda m: m["stateStoreInfo"][0].update(numPartitions=4))


def b_metadata_of_another_operator(root: Path, facts: dict) -> str:
    """The operator metadata names a deduplication; the state is an aggregation's."""
    return edit_operator_metadata(root, lambda m: m["operatorInfo"].update(operatorName="dedupe"))


def b_unloadable(root: Path, facts: dict) -> str:
    drop(root / "checkpoint" / "state" / "0" / "1" / f"{facts['last_batch'] + 1}.delta")
    return "state/0/1"


def b_leftovers(root: Path, facts: dict) -> str:
    part = root / "checkpoint" / "state" / "0" / "0"
    shutil.copyfile(part / f"{facts['last_batch'] + 1}.delta", part / f"{facts['last_batch'] + 5}.delta")
    return "state/0/0"


def partitions(facts: dict) -> int:
    return facts["operators"][0]["num_partitions"]


def b_missing_partition(root: Path, facts: dict) -> str:
    shutil.rmtree(root / "checkpoint" / "state" / "0" / str(partitions(facts) - 1))
    return f"state/0/{partitions(facts) - 1}"


def b_extra_partition(root: Path, facts: dict) -> str:
    shutil.copytree(root / "checkpoint" / "state" / "0" / "0", root / "checkpoint" / "state" / "0" / str(partitions(facts)))
    return f"state/0/{partitions(facts)}"


def b_unique_id(root: Path, facts: dict) -> str:
    """Drop the file of a retained version that the restart does not read (older than the chain's full copy)."""
    ckpt = open_checkpoint(str(root / "checkpoint"))
    op = ckpt.operators[0]
    part = next(p for p in op.partitions if p.partition == 0)
    ids = store_unique_ids(ckpt, op, part)
    chain, missing = part.restore_plan(ckpt.next_batch, ids)
    assert missing is None and chain[0].kind == "zip"
    victim = max((f for f in part.files if f.version < chain[0].version and ids.get(f.version) == f.unique_id),
                 key=lambda f: f.version)
    for f in part.files:
        if f.version == victim.version:
            drop(root / "checkpoint" / f.path)
    return "state/0/0"


def b_checksum(root: Path, facts: dict) -> str:
    """A delta whose Hadoop sidecar is another delta's (its content as Spark wrote it)."""
    path = f"state/0/0/{facts['last_batch'] + 1}.delta"
    shutil.copyfile(root / "checkpoint" / "state/0/0" / f".{facts['last_batch']}.delta.crc",
                    root / "checkpoint" / "state/0/0" / f".{facts['last_batch'] + 1}.delta.crc")
    return path


def b_damaged(root: Path, facts: dict) -> str:
    """The newest delta of a partition cut to 20 bytes."""
    path = f"state/0/2/{facts['last_batch'] + 1}.delta"
    data = (root / "checkpoint" / path).read_bytes()
    (root / "checkpoint" / path).write_bytes(data[:20])
    return path


def b_skipped(root: Path, facts: dict) -> str:
    """The newest RocksDB snapshot at or below the version the next batch loads, overwritten with zeros."""
    ckpt = open_checkpoint(str(root / "checkpoint"))
    part = next(p for p in ckpt.operators[0].partitions if p.partition == 0)
    chain, _ = part.restore_plan(ckpt.next_batch)
    assert chain[0].kind == "zip"
    target = root / "checkpoint" / chain[0].path
    target.write_bytes(bytes(target.stat().st_size))
    return chain[0].path


def b_skipped_rows(root: Path, facts: dict) -> str:
    """A byte flipped in the first data block of an SST file the newest snapshot of partition 0 names, without its
    Hadoop sidecar (as on an object store)."""
    from oracle_cases import sst_block_flipped, sst_named_only_by

    victim = sst_named_only_by(root, "state/0/0/12.zip")
    sst_block_flipped("state/0/0/12.zip", "data", sidecar=False)(root)
    return str(victim.relative_to(root / "checkpoint"))


def b_future_snapshot(root: Path, facts: dict) -> str:
    """A snapshot four versions ahead (the first delta of a store is a full copy of its state: a valid snapshot)."""
    path = f"state/0/2/{facts['last_batch'] + 5}.snapshot"
    shutil.copyfile(root / "checkpoint" / "state/0/2/1.delta", root / "checkpoint" / path)
    return path


def b_checksum_log(root: Path, facts: dict) -> str:
    meta = root / "checkpoint" / "metadata"
    text = meta.read_text()
    at = text.index('"id":"') + 6
    meta.write_text(text[:at] + ("0" if text[at] != "0" else "1") + text[at + 1:])
    return "metadata"


def b_checksum_spark(root: Path, facts: dict) -> str:
    ckpt = open_checkpoint(str(root / "checkpoint"))
    op = ckpt.operators[0]
    part = next(p for p in op.partitions if p.partition == 0)
    chain, _ = part.restore_plan(ckpt.next_batch, store_unique_ids(ckpt, op, part))
    assert (root / "checkpoint" / f"{chain[-1].path}.crc").exists()
    flip_byte(root / "checkpoint" / chain[-1].path)
    return chain[-1].path


def b_source_log(root: Path, facts: dict) -> str:
    ckpt = root / "checkpoint"
    end = json.loads((ckpt / "offsets" / str(facts["last_batch"])).read_text().split("\n")[2])["logOffset"]
    drop(log_file(ckpt / "sources" / "0", end))
    return f"sources/0/{end}"


def b_compaction(root: Path, facts: dict) -> str:
    folder = root / "checkpoint" / "sources" / "0"
    latest = max(int(p.name) for p in folder.iterdir() if p.name.isdigit())
    # the source log was compacted every 3 batches: 3 batches on, Spark expects <id>.compact
    for batch in range(latest + 1, latest + 4):
        shutil.copyfile(folder / str(latest), folder / str(batch))
    return f"sources/0/{latest + 2}"


def b_sink_ahead(root: Path, facts: dict) -> str:
    """The sink committed one batch more than the checkpoint: a log file naming data files of its own (copies of the
    last batch's, renamed)."""
    sink = root / "output" / "_spark_metadata"
    last = facts["last_batch"]
    text = log_file(sink, last).read_text()
    for name in {Path(json.loads(line)["path"]).name for line in text.splitlines()[1:]}:
        shutil.copyfile(root / "output" / name, root / "output" / f"ahead-{name}")
        text = text.replace(f"/{name}", f"/ahead-{name}")
    (sink / str(last + 1)).write_text(text)
    return f"../output/_spark_metadata/{last + 1}"


def b_sink_behind(root: Path, facts: dict) -> str:
    drop(log_file(root / "output" / "_spark_metadata", facts["last_batch"]))
    return "../output/_spark_metadata"


def b_sink_unparseable(root: Path, facts: dict) -> str:
    path = log_file(root / "output" / "_spark_metadata", facts["last_batch"])
    hand_edit(path, b"v1\nnot json")
    return f"../output/_spark_metadata/{path.name}"


def b_interrupted_repair(root: Path, facts: dict) -> str:
    """What a rewind killed part way leaves behind (its failure injected after a few steps), on a copy whose logs
    name its own input (else, the generator's directory gone, its last batch's input looks moved: WM050)."""
    from wmcheck.checkpoint.repair._hooks import injected
    from wmcheck.checkpoint.repair.backup import JOURNAL

    sink_at_home(root, "agg_window_hdfs")
    with pytest.raises(repair.InjectedFailure), injected(fail_after=3):
        repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=facts["last_batch"] - 3),
                   repair.RunOptions(execute=True, idle_ms=0))
    return JOURNAL


def b_schema_elsewhere(root: Path, facts: dict) -> str:
    """The latest operator metadata names the schema file of another copy, as a copied checkpoint does."""
    ckpt, other = root / "checkpoint", root / "original"
    repair.run(str(ckpt), repair.RelocateRequest(), repair.RunOptions(execute=True, idle_ms=0))  # whatever directory the fixture sits in
    shutil.rmtree(ckpt / "_wmcheck")
    shutil.copytree(ckpt, other)
    repair.run(str(other), repair.RelocateRequest(), repair.RunOptions(execute=True, idle_ms=0))
    path = "state/0/_metadata/v2/4"
    hand_edit(ckpt / path, (other / path).read_bytes())
    return path


def b_schema_gone(root: Path, facts: dict) -> str:
    """The same after the other copy was removed (the checkpoint was moved)."""
    path = b_schema_elsewhere(root, facts)
    shutil.rmtree(root / "original")
    return path


def b_never_evicts(root: Path, facts: dict) -> str:
    """The query as Spark wrote it (its aggregation, downstream of applyInPandasWithState, never evicts), relocated
    first: a copy's transformWithState schema files name the generator's directory, WM027 or WM028 by whether it
    still exists."""
    repair.run(str(root / "checkpoint"), repair.RelocateRequest(), repair.RunOptions(execute=True, idle_ms=0))
    shutil.rmtree(root / "checkpoint" / "_wmcheck")
    return "state/2"


def b_own_schema_gone(root: Path, facts: dict) -> str:
    """The checkpoint's own schema files deleted (a cleanup of '_' directories), the metadata naming them kept."""
    shutil.rmtree(names_own_schemas(root / "checkpoint") / "state/0/_stateSchema/default")
    return "state/0/_metadata/v2/4"


def b_metadata_v2_gone(root: Path, facts: dict) -> str:
    """A transformWithState operator's metadata directory deleted, its schema files kept."""
    shutil.rmtree(root / "checkpoint" / "state/0/_metadata/v2")
    return "state/0/_metadata/v2"


def b_as_left(root: Path, name: str, path: str) -> str:
    """The fixture as Spark left it, its logs naming the copy's own files (its last batch read input files, which
    Spark asks for again on restart where they were logged: WM050 in place)."""
    sink_at_home(root, name)
    return path


def b_last_source_offset(offset: bytes) -> Callable[[Path, dict], str]:
    """The last offsets file's file-source offset (``{"logOffset":9}``) edited by hand to ``offset``."""
    def apply(root: Path, facts: dict) -> str:
        last = facts["last_batch"]
        path = root / "checkpoint" / "offsets" / str(last)
        hand_edit(path, path.read_bytes().replace(b'{"logOffset":9}', offset))
        return f"offsets/{last}"
    return apply


def b_operator_state_gone(root: Path, facts: dict) -> str:
    """The first of two operators' state directory deleted."""
    shutil.rmtree(root / "checkpoint" / "state" / "0")
    return "state/0"


def b_state_emptied(root: Path, facts: dict) -> str:
    """Everything under state/ deleted, the directory kept."""
    for path in (root / "checkpoint" / "state").iterdir():
        shutil.rmtree(path)
    return "state"


def b_state_removed(root: Path, facts: dict) -> str:
    """state/ deleted from a checkpoint of format 2 (its commits name the operators)."""
    shutil.rmtree(root / "checkpoint" / "state")
    return "state"


def b_sink_file_deleted(root: Path, facts: dict) -> str:
    """The sink's last log file also deletes a data file of the batch before it (the file left in the sink)."""
    last = facts["last_batch"]
    log = root / "output" / "_spark_metadata"
    hand_edit(log / str(last), (log / str(last)).read_bytes().rstrip(b"\n") + b"\n" +
              (log / str(last - 1)).read_bytes().split(b"\n")[1].replace(b'"action":"add"', b'"action":"delete"'))
    return f"../output/_spark_metadata/{last}"


def b_log_entry(log: str, change: Callable[[dict], object]) -> Callable[[Path, dict], str]:
    """The last entry of the newest file of a file log (``output/_spark_metadata`` or ``checkpoint/sources/0``)
    changed by hand."""

    def run(root: Path, facts: dict) -> str:
        folder = root / log
        newest = max((p for p in folder.iterdir() if p.name.split(".")[0].isdigit()), key=lambda p: int(p.name.split(".")[0]))
        edit_json(newest, -1, change)
        return str(newest.relative_to(root / "checkpoint")) if log.startswith("checkpoint") else \
            f"../{newest.relative_to(root)}"

    return run


def b_source_log_line_lost(root: Path, facts: dict) -> str:
    """The newest compact file of the file-source log without its last line (the only file of its last log batch)."""
    compact = root / "checkpoint" / "sources" / "0" / "9.compact"
    hand_edit(compact, b"\n".join(compact.read_bytes().rstrip(b"\n").split(b"\n")[:-1]))
    return "sources/0/9.compact"


def b_log_file_of_an_earlier_batch(folder: str, source: str, target: str, shown: str) -> Callable[[Path, dict], str]:
    """A log file and its sidecar replaced by an earlier one of the same log (a restore that took the wrong file)."""

    def apply(root: Path, facts: dict) -> str:
        for old, new in ((source, target), (f".{source}.crc", f".{target}.crc")):
            shutil.copy2(root / folder / old, root / folder / new)
        return shown

    return apply


def b_last_commit_lost(root: Path, facts: dict) -> str:
    """The last commit file gone with its sidecar, the file sink's log holding the batch (a stop between the two)."""
    last = facts["last_batch"]
    for name in (str(last), f".{last}.crc"):
        (root / "checkpoint" / "commits" / name).unlink()
    return f"../output/_spark_metadata/{last}"


def b_first_sink_log_file_gone(root: Path, facts: dict) -> str:
    """The file sink's log without its first file (no compact file yet): Spark's readers read it from batch 0."""
    for name in ("0", ".0.crc"):
        (root / "output" / "_spark_metadata" / name).unlink()
    return "../output/_spark_metadata/0"


def b_first_source_log_file_gone(root: Path, facts: dict) -> str:
    """The file-source log without its first file (no compact file yet): Spark restores its seen files from batch 0."""
    for name in ("0", ".0.crc"):
        (root / "checkpoint" / "sources" / "0" / name).unlink()
    return "sources/0/0"


def b_source_log_file_of_the_other_source(root: Path, facts: dict) -> str:
    """The right source's last log file replaced by the left source's (a copy mixing the two logs)."""
    shutil.copy2(root / "checkpoint" / "sources" / "0" / "5", root / "checkpoint" / "sources" / "1" / "5")
    return "sources/1/5"


TTL_SCHEMA = "state/0/_stateSchema/default/0_d6d43710-37b5-4627-86c7-f6130c07e874"


def b_tws_schema_of_another_query(root: Path, facts: dict) -> str:
    """tws_ttl's state schema file replaced by tws_pandas's (no TTL, event-time timers), its sidecar left stale."""
    shutil.copy2(FIXTURES / "tws_pandas/checkpoint/state/0/_stateSchema/default/0_ca8ba419-8489-44a9-a404-06186defde9d",
                 root / "checkpoint" / TTL_SCHEMA)
    return TTL_SCHEMA


def b_last_watermark_raised(root: Path, facts: dict) -> str:
    """The last (committed) offsets file's watermark raised an hour above its commit's nextBatchWatermarkMs."""
    last = facts["last_batch"]
    edit_json(root / "checkpoint" / "offsets" / str(last), 1, lambda o: o.update(batchWatermarkMs=o["batchWatermarkMs"] + 3_600_000))
    return f"offsets/{last}"


def b_last_commit_watermark_raised(root: Path, facts: dict) -> str:
    """The last commit's nextBatchWatermarkMs raised an hour, in a batch that read no input."""
    last = facts["last_batch"]
    edit_json(root / "checkpoint" / "commits" / str(last), 1,
              lambda o: o.update(nextBatchWatermarkMs=o["nextBatchWatermarkMs"] + 3_600_000))
    return f"commits/{last}"


def b_operator_directories_swapped(root: Path, facts: dict) -> str:
    """state/0 and state/1 swapped (a mix-up when restoring them)."""
    state = root / "checkpoint" / "state"
    (state / "0").rename(state / "tmp")
    (state / "1").rename(state / "0")
    (state / "tmp").rename(state / "1")
    return "state/0/_metadata/metadata"


def b_empty_v1_metadata(root: Path, facts: dict) -> str:
    """Operator 1's v1 operator metadata emptied (a crash while writing it)."""
    hand_edit(root / "checkpoint" / "state" / "1" / "_metadata" / "metadata", b"")
    return "state/1/_metadata/metadata"


def b_last_offsets_copied(root: Path, facts: dict) -> str:
    """The last (committed) offsets file replaced by the one before it."""
    last = facts["last_batch"]
    offsets = root / "checkpoint" / "offsets"
    hand_edit(offsets / str(last), (offsets / str(last - 1)).read_bytes())
    return f"offsets/{last}"


def b_sink_file_twice(root: Path, facts: dict) -> str:
    """The sink's last log file also names a data file of the batch before it."""
    last = facts["last_batch"]
    log = root / "output" / "_spark_metadata"
    hand_edit(log / str(last), (log / str(last)).read_bytes().rstrip(b"\n") + b"\n" +
              (log / str(last - 1)).read_bytes().split(b"\n")[1])
    return f"../output/_spark_metadata/{last}"


def b_pending_offset_dropped(root: Path, facts: dict) -> str:
    """The last batch not committed, its offsets file with no offset ('-') for the file source."""
    last = facts["last_batch"]
    drop(root / "checkpoint" / "commits" / str(last))
    path = root / "checkpoint" / "offsets" / str(last)
    hand_edit(path, path.read_bytes().replace(b'{"logOffset":9}', b"-"))
    return f"offsets/{last}"


def b_only_last_offsets(root: Path, facts: dict) -> str:
    """Every offsets and commit file but the last batch's removed (a retention rule of the store)."""
    last = facts["last_batch"]
    for log in ("offsets", "commits"):
        for batch in range(last):
            drop(root / "checkpoint" / log / str(batch))
    return f"offsets/{last - 1}"


def b_upcoming_orphan_crc(root: Path, facts: dict) -> str:
    """The last commit deleted by hand, its sidecar left behind."""
    (root / "checkpoint" / "commits" / str(facts["last_batch"])).unlink()
    return f"commits/.{facts['last_batch']}.crc"


def b_source_log_sidecar(root: Path, facts: dict) -> str:
    """The last file of a file source's log deleted by hand, its sidecar left: the file Spark writes there next."""
    folder = root / "checkpoint" / "sources" / "0"
    last = log_file(folder, max(int(p.name.split(".")[0]) for p in folder.iterdir() if p.name[0].isdigit()))
    last.unlink()
    return f"sources/0/.{last.name}.crc"


def b_sink_log_sidecar(root: Path, facts: dict) -> str:
    """A checksum file of the sink log batch Spark writes next, without its file."""
    sink = root / "output" / "_spark_metadata"
    shutil.copyfile(sink / f".{facts['last_batch']}.crc", sink / f".{facts['last_batch'] + 1}.crc")
    return f"../output/_spark_metadata/.{facts['last_batch'] + 1}.crc"


def b_operator_metadata_sidecar(root: Path, facts: dict) -> str:
    """The v1 operator metadata deleted by hand, its sidecar left: Spark writes the file again when the query starts."""
    (root / "checkpoint" / "state" / "0" / "_metadata" / "metadata").unlink()
    return "state/0/_metadata/.metadata.crc"


def b_operator_metadata_v2_sidecar(root: Path, facts: dict) -> str:
    """A checksum file of the v2 operator metadata of the batch Spark runs next, without its file (in a copy that names
    its own schema files)."""
    v2 = names_own_schemas(root / "checkpoint") / "state" / "0" / "_metadata" / "v2"
    shutil.copyfile(v2 / ".0.crc", v2 / f".{facts['last_batch'] + 1}.crc")
    return f"state/0/_metadata/v2/.{facts['last_batch'] + 1}.crc"


def b_zero_padded_offsets(root: Path, facts: dict) -> str:
    """A copy of the last offsets file named with a leading zero: Spark lists it as the next batch."""
    offsets = root / "checkpoint" / "offsets"
    name = f"0{facts['last_batch'] + 1}"
    shutil.copyfile(offsets / str(facts["last_batch"]), offsets / name)
    return f"offsets/{name}"


def b_odd_log_name(where: str, name: str) -> Callable[[Path, dict], str]:
    """A copy of a log's file named as Spark never names one (leading zeros, another script's digits), past the log's
    latest batch: Spark lists it as that batch and reads the file of its own name."""
    def apply(root: Path, facts: dict) -> str:
        log = root / where
        shutil.copyfile(max((p for p in log.iterdir() if p.name[0].isdigit()), key=lambda p: p.stat().st_mtime), log / name)
        return f"{where.removeprefix('checkpoint/')}/{name}" if where.startswith("checkpoint/") else f"../{where}/{name}"
    return apply


def b_snapshot_named_by_hand(partition: str, source: str, name: str) -> Callable[[Path, dict], str]:
    """A state file copied beside itself under a name ending as the provider's snapshots do (a backup kept by hand)."""
    def apply(root: Path, facts: dict) -> str:
        shutil.copyfile(root / "checkpoint" / partition / source, root / "checkpoint" / partition / name)
        return f"{partition}/{name}"
    return apply


def b_delta_copied_to_snapshot(root: Path, facts: dict) -> str:
    """Partition 0's 13.delta copied to 13.snapshot: the full copy the next load starts from holds only batch 12's
    changes."""
    state_file_of("0/13.delta", "0/13.snapshot")(root)
    return "state/0/0/13.snapshot"


def b_sink_data_file_gone(root: Path, facts: dict) -> str:
    """A data file the sink's log names deleted from the sink directory."""
    data_files_of(root, facts["last_batch"] - 1)[0].unlink()
    return "../output/_spark_metadata"


def b_sink_data_file_rewritten(root: Path, facts: dict) -> str:
    """A data file the sink's log names rewritten with one byte more than the log records."""
    path = data_files_of(root, facts["last_batch"] - 1)[0]
    path.write_bytes(path.read_bytes() + b"\0")
    return "../output/_spark_metadata"


def b_pending_input_gone(root: Path, facts: dict) -> str:
    """The last batch not committed (a crash after the sink committed it), and the input file it read deleted."""
    drop(root / "checkpoint" / "commits" / "9")
    logged_input(root, 8).unlink()
    return "offsets/9"


def b_pending_input_moved(root: Path, facts: dict) -> str:
    """The last batch not committed, and the logs naming the input where it was before the fixture moved here."""
    drop(root / "checkpoint" / "commits" / "9")
    return b_input_moved(root, facts)


def b_input_moved(root: Path, facts: dict) -> str:
    """The logs naming the input where it was before the fixture moved here (its last batch read a file)."""
    repair.run(str(root / "checkpoint"), repair.RelocateRequest(path_map={str(root): str(root.parent / "before")}),
               repair.RunOptions(execute=True, idle_ms=0))
    shutil.rmtree(root / "checkpoint" / "_wmcheck")
    return "offsets/9"


def b_sink_log_gone(root: Path, facts: dict) -> str:
    """The sink's log directory deleted (a cleanup of '_' directories): its data files stay."""
    shutil.rmtree(root / "output" / "_spark_metadata")
    return "../output/_spark_metadata"


def b_sink_log_gap(root: Path, facts: dict) -> str:
    drop(log_file(root / "output" / "_spark_metadata", facts["last_batch"] - 2))
    return f"../output/_spark_metadata/{facts['last_batch'] - 2}"


def b_sink_names_elsewhere(root: Path, facts: dict, copy: bool = True) -> str:
    """The sink's log names its files in another directory (a copied sink; moved when not ``copy``)."""
    elsewhere = root / "old" / "output"
    repair.run(str(root / "checkpoint"), repair.RelocateRequest(path_map={str(root / "output"): str(elsewhere)},
                                                                file_sink=str(root / "output")),
               repair.RunOptions(execute=True, idle_ms=0))
    shutil.rmtree(root / "checkpoint" / "_wmcheck")
    if copy:
        shutil.copytree(root / "output", elsewhere)
    return "../output/_spark_metadata"


def b_sink_moved(root: Path, facts: dict) -> str:
    return b_sink_names_elsewhere(root, facts, copy=False)


def b_unlisted_sink_file(root: Path, facts: dict) -> str:
    shutil.copyfile(next((root / "output").glob("part-*.parquet")), root / "output" / "part-00009-stray.snappy.parquet")
    return "../output/part-00009-stray.snappy.parquet"


BREAKS = {
    "WM001": Break("WM001", "agg_window_hdfs", b_unparseable),
    "WM001-sink": Break("WM001", "agg_window_hdfs", b_sink_unparseable, sink=True),
    "WM001-conf-boolean": Break("WM001", "agg_window_hdfs", lambda root, facts: b_conf_value(root, facts, True)),
    "WM002": Break("WM002", "agg_window_hdfs", b_offsets_gap, also=("WM003",)),
    "WM003": Break("WM003", "agg_window_hdfs", b_commits_gap),
    "WM004": Break("WM004", "agg_window_hdfs", b_commit_without_offsets),
    "WM005": Break("WM005", "agg_window_hdfs", b_uncommitted),
    "WM006": Break("WM006", "agg_window_hdfs", b_commit_version),
    "WM007": Break("WM007", "agg_window_hdfs", b_metadata_missing),
    "WM008": Break("WM008", "agg_window_hdfs", b_metadata_invalid),
    "WM009": Break("WM009", "agg_window_hdfs", b_temp_file),
    "WM010": Break("WM010", "agg_window_hdfs", b_orphan_crc),
    "WM011": Break("WM011", "agg_window_hdfs", b_decreasing),
    "WM012": Break("WM012", "agg_window_hdfs", b_commit_vs_next),
    "WM013": Break("WM013", "agg_window_hdfs", b_future),
    "WM014": Break("WM014", "agg_window_hdfs", b_stuck),
    "WM015": Break("WM015", "agg_window_hdfs", b_conf_drift),
    "WM015-missing": Break("WM015", "agg_window_hdfs", b_conf_missing),
    "WM043": Break("WM043", "agg_window_hdfs", b_source_count),
    "WM044": Break("WM044", "agg_window_hdfs", b_conf_drift_unused),
    "WM057": Break("WM057", "agg_window_hdfs", b_conf_refused),
    "WM058": Break("WM058", "agg_window_hdfs", b_foreign_partition),
    "WM059": Break("WM059", "agg_window_hdfs", b_schema_of_another_aggregation),
    "WM062": Break("WM062", "agg_window_rocksdb", b_evicted_keys_loaded),
    "WM060": Break("WM060", "checkpoint_v2", b_commit_without_unique_ids),
    "WM057-everywhere": Break("WM057", "agg_window_hdfs", b_conf_refused_everywhere),
    "WM075": Break("WM075", "agg_window_hdfs", lambda root, facts: b_older_offsets_gap(root), also=("WM010",)),
    "WM015-partitions": Break("WM015", "agg_window_hdfs", b_partitions_last),
    "WM074": Break("WM074", "agg_window_hdfs", b_partitions_everywhere),
    "WM045": Break("WM045", "agg_window_hdfs", b_metadata_partition_count),
    "WM045-empty": Break("WM045", "join_then_agg", b_empty_v1_metadata),  # the join's: no check fails on it (WM001)
    "WM046": Break("WM046", "agg_window_hdfs", b_metadata_of_another_operator),
    "WM016": Break("WM016", "agg_window_hdfs", b_unloadable),
    "WM017": Break("WM017", "agg_window_hdfs", b_leftovers),
    "WM018": Break("WM018", "agg_window_hdfs", b_missing_partition),
    "WM019": Break("WM019", "agg_window_hdfs", b_extra_partition),
    "WM020": Break("WM020", "checkpoint_v2", b_unique_id),
    "WM030": Break("WM030", "agg_window_hdfs", b_checksum),
    "WM030-log": Break("WM030", "agg_window_hdfs", b_checksum_log),
    "WM021-spark": Break("WM021", "checkpoint_v2", b_checksum_spark, also=("WM039",)),
    "WM022": Break("WM022", "agg_window_hdfs", b_source_log),
    "WM022-gone": Break("WM022", "agg_window_hdfs", lambda root, facts: shutil.rmtree(root / "checkpoint" / "sources")
                        or "sources/0"),
    "WM023": Break("WM023", "compaction", b_compaction),
    "WM024": Break("WM024", "agg_window_hdfs", b_sink_ahead, sink=True),
    "WM025": Break("WM025", "agg_window_hdfs", b_sink_behind, also=("WM034",), sink=True),
    "WM047": Break("WM047", "agg_window_hdfs", b_sink_data_file_gone, sink=True),
    "WM047-rewritten": Break("WM047", "agg_window_hdfs", b_sink_data_file_rewritten, sink=True),
    "WM049": Break("WM049", "stalled_event_time", b_pending_input_gone, sink=True),
    "WM050": Break("WM050", "stalled_event_time", b_pending_input_moved, sink=True),
    "WM050-committed": Break("WM050", "stalled_event_time", b_input_moved, sink=True),
    "WM051": Break("WM051", "tws_pandas", b_metadata_v2_gone),
    "WM052": Break("WM052", "agg_window_hdfs", b_last_source_offset(b'{"logOffset":8}')),  # goes back
    "WM053": Break("WM053", "agg_then_agg", b_operator_state_gone),
    "WM053-emptied": Break("WM053", "agg_window_hdfs", b_state_emptied),
    "WM053-removed": Break("WM053", "checkpoint_v2", b_state_removed),
    "WM054": Break("WM054", "agg_window_hdfs", b_last_source_offset(b'{"topic":{"0":5}}')),  # a Kafka source's
    "WM054-dropped": Break("WM054", "agg_window_hdfs", b_pending_offset_dropped),
    "WM055": Break("WM055", "agg_window_hdfs", b_old_file_cut("checkpoint/offsets", "5")),
    "WM056": Break("WM056", "agg_window_hdfs", b_sink_file_twice, sink=True),
    "WM061": Break("WM061", "agg_window_hdfs", b_sink_file_deleted, sink=True),
    "WM063": Break("WM063", "agg_window_hdfs", b_log_entry("output/_spark_metadata", lambda e: e.update(size=str(e["size"]))),
                   sink=True),
    "WM063-directory": Break("WM063", "agg_window_hdfs", b_log_entry("output/_spark_metadata", lambda e: e.update(isDir=True)),
                             sink=True),
    "WM046-unknown-name": Break("WM046", "agg_window_hdfs", lambda root, facts: b_edit(
        root, "checkpoint/state/0/_metadata/metadata", '"stateStoreSave"', '"StateStoreSave"')),
    "WM063-authority": Break("WM063", "agg_window_hdfs", b_log_entry("output/_spark_metadata", lambda e: e.update(
        path=e["path"].replace("file:///", "file://localhost/"))), sink=True),
    "WM063-source": Break("WM063", "agg_window_hdfs", b_log_entry("checkpoint/sources/0", lambda e: e.pop("timestamp"))),
    "WM064": Break("WM064", "agg_window_hdfs", b_source_log_line_lost),
    "WM064-bare-path": Break("WM064", "agg_window_hdfs", b_log_entry("checkpoint/sources/0", lambda e: e.update(
        path=e["path"].replace("file://", ""))), sink=True),  # its logs naming the copy's own input: the file is there
    "WM064-spelled": Break("WM064", "agg_window_hdfs", b_log_entry("checkpoint/sources/0", lambda e: e.update(
        path=e["path"].replace("file:///", "file:/").replace("run2-", "run2%2D"))), sink=True),  # the copy's own input
    "WM065": Break("WM065", "agg_window_hdfs", b_last_watermark_raised),
    "WM077": Break("WM077", "python_source", b_last_offsets_copied, sink=True),
    "WM079": Break("WM079", "agg_window_hdfs", b_last_commit_watermark_raised),
    "WM080": Break("WM080", "dedup_then_agg", b_operator_directories_swapped),
    "WM066": Break("WM066", "checkpoint_v2", b_last_commit_lost, sink=True),
    "WM068": Break("WM068", "join_stream_stream", lambda root, facts: b_join_store_of_the_version_before(
        root, "left-keyToNumValues")),
    "WM071": Break("WM071", "agg_window_hdfs", lambda root, facts: b_old_input(root), sink=True),
    "WM069": Break("WM069", "pandas_state_p3", lambda root, facts: newest_state_back(root) or "state/0/2"),
    "WM069-sessions": Break("WM069", "session_window_p3", lambda root, facts: newest_state_back(root) or "state/0/2",
                            sink=True),
    "WM067": Break("WM067", "agg_window_hdfs", b_log_entry("checkpoint/sources/0", lambda e: e.update(
        timestamp=LAST_BATCH_MS + 30 * DAY_MS)), sink=True),  # 30 days after offsets/12's batchTimestampMs; logs naming the copy
    "WM031-first": Break("WM031", "dedup_watermark", b_first_sink_log_file_gone, also=("WM034",), sink=True),
    "WM022-first": Break("WM022", "dedup_watermark", b_first_source_log_file_gone),
    "WM064-mixed": Break("WM064", "join_stream_stream", b_source_log_file_of_the_other_source, also=("WM030",)),
    "WM064-earlier": Break("WM064", "compaction", b_log_file_of_an_earlier_batch(
        "checkpoint/sources/0", "7", "9", "sources/0/9")),  # log batch 9 holds log batch 7's line
    "WM076": Break("WM076", "compaction", b_log_file_of_an_earlier_batch(
        "output/_spark_metadata", "8.compact", "11.compact", "../output/_spark_metadata/11.compact"),
        also=("WM034",), sink=True),
    "WM078": Break("WM078", "compaction", b_log_file_of_an_earlier_batch(
        "checkpoint/state/0/1", "11.delta", "12.delta", "state/0/1/12.delta")),  # its delete of a window comes again
    "WM046-tws": Break("WM046", "tws_ttl", b_tws_schema_of_another_query, also=("WM030",), sink=True),
    "WM055-commit": Break("WM055", "agg_window_hdfs", b_old_file_cut("checkpoint/commits", "5")),
    "WM055-source-log": Break("WM055", "agg_window_hdfs", b_old_file_cut("checkpoint/sources/0", "5")),
    "WM055-sink-log": Break("WM055", "agg_window_hdfs", b_old_file_cut("output/_spark_metadata", "5"), sink=True),
    "WM002-only-last": Break("WM002", "agg_window_hdfs", b_only_last_offsets),
    "WM001-odd-name": Break("WM001", "agg_window_hdfs", b_zero_padded_offsets),
    "WM070": Break("WM070", "agg_window_rocksdb", b_snapshot_named_by_hand("state/0/0", "12.zip", "old.zip")),
    "WM070-hdfs": Break("WM070", "agg_window_hdfs", b_snapshot_named_by_hand("state/0/1", "13.delta", "x.snapshot")),
    "WM072": Break("WM072", "agg_window_hdfs", b_delta_copied_to_snapshot),
    "WM073": Break("WM073", "agg_window_hdfs", lambda root, facts: entry_made_a_directory("state/0/1/13.snapshot")(root)
                   or "state/0/1/13.snapshot"),
    "WM070-hdfs-zero-padded": Break("WM070", "agg_window_hdfs", b_snapshot_named_by_hand("state/0/1", "12.delta", "012.snapshot")),
    "WM001-odd-name-digits": Break("WM001", "agg_window_hdfs", b_odd_log_name("checkpoint/offsets", "\u0661\u0663")),
    "WM001-odd-source-log-name": Break("WM001", "agg_window_hdfs", b_odd_log_name("checkpoint/sources/0", "010")),
    "WM001-odd-source-log-compact-name": Break("WM001", "compaction", b_odd_log_name("checkpoint/sources/0", "+0019.compact")),
    "WM001-odd-sink-log-name": Break("WM001", "agg_window_hdfs", b_odd_log_name("output/_spark_metadata", "013"), sink=True),
    "WM025-log-gone": Break("WM025", "agg_window_hdfs", b_sink_log_gone, sink=True),
    "WM026": Break("WM026", "agg_window_hdfs", b_interrupted_repair, also=("WM017", "WM029")),  # half rewound
    "WM027": Break("WM027", "tws_pandas", b_schema_gone),
    "WM027-own-gone": Break("WM027", "tws_pandas", b_own_schema_gone),
    "WM028": Break("WM028", "tws_pandas", b_schema_elsewhere),
    "WM029": Break("WM029", "agg_window_hdfs", b_upcoming_orphan_crc),
    "WM029-source": Break("WM029", "agg_window_hdfs", b_source_log_sidecar, also=("WM022",)),
    "WM029-sink": Break("WM029", "agg_window_hdfs", b_sink_log_sidecar, sink=True),
    "WM029-operator-metadata": Break("WM029", "agg_window_hdfs", b_operator_metadata_sidecar),
    "WM029-operator-metadata-v2": Break("WM029", "tws_pandas", b_operator_metadata_v2_sidecar),
    "WM031": Break("WM031", "agg_window_hdfs", b_sink_log_gap, also=("WM034",), sink=True),
    "WM032": Break("WM032", "agg_window_hdfs", b_sink_moved, sink=True),
    "WM033": Break("WM033", "agg_window_hdfs", b_sink_names_elsewhere, sink=True),
    "WM034": Break("WM034", "agg_window_hdfs", b_unlisted_sink_file, sink=True),
    "WM035": Break("WM035", "repartition_failed_hdfs", lambda root, facts: f"offsets/{facts['repartition']['batch']}"),
    "WM036": Break("WM036", "repartition_rocksdb",
                   lambda root, facts: f"../output/_spark_metadata/{facts['repartition']['batch']}", sink=True),
    "WM038": Break("WM038", "union_stall_min", lambda root, facts: b_as_left(root, "union_stall_min", "offsets/5")),
    "WM039": Break("WM039", "agg_window_hdfs", b_damaged),  # WM039 says it, not WM030
    "WM040": Break("WM040", "agg_window_rocksdb", b_skipped),  # its stale sidecar: WM040 says what Spark does
    "WM041": Break("WM041", "agg_window_hdfs", b_future_snapshot),
    "WM048": Break("WM048", "agg_window_rocksdb", b_skipped_rows),
    "WM042": Break("WM042", "fmgws_tws_agg", b_never_evicts),
}


def test_every_check_has_a_breaking_case():
    """(WM037's cases need another user or a read-only mount: tests/test_access.py; WM081-WM084's a live broker and
    the topic broken there: tests/test_kafka_check.py; WM085 and WM086's a Delta table broken with deltalake:
    tests/test_delta_check.py.)"""
    assert {b.code for b in BREAKS.values()} == set(CHECKS) - {"WM000", "WM037", "WM081", "WM082", "WM083", "WM084",
                                                               "WM085", "WM086"}


@pytest.fixture(params=sorted(BREAKS))
def broken(request, copy_fixture):
    """A broken copy of a fixture: (case, root, expected path, extra CLI args)."""
    case = BREAKS[request.param]
    root = copy_fixture(case.fixture)
    if case.sink:
        sink_at_home(root, case.fixture)
    path = case.apply(root, fixture_facts(case.fixture))
    args = ["--file-sink", str(root / "output")] if case.sink else []
    return case, root, path, args


def test_library_reports_the_break(broken):
    case, root, path, args = broken
    findings = check_checkpoint(open_checkpoint(str(root / "checkpoint")), str(root / "output") if case.sink else None)
    assert sorted({f.code for f in findings}) == sorted({case.code, *case.also}), findings
    mine = [f for f in findings if f.code == case.code]
    assert [(f.severity, f.path) for f in mine] == [(CHECKS[case.code].severity, path)], mine
    assert all(f.checkpoint == open_checkpoint(str(root / "checkpoint")).location for f in findings)


def expected_exit(case: Break, strict: bool = False) -> int:
    return 1 if CHECKS[case.code].severity == "error" or strict else 0


def test_json_and_csv(broken):
    case, root, path, args = broken
    ckpt = str(root / "checkpoint")
    rows = json.loads(run_cli("check", ckpt, *args, "--format", "json", exit_code=expected_exit(case)).stdout)
    assert all(list(r) == ["code", "severity", "checkpoint", "path", "message", "fix"] for r in rows)
    assert all(list(r["fix"]) == ["kind", "text", "request"] for r in rows)
    mine = [r for r in rows if r["code"] == case.code]
    assert [(r["severity"], r["checkpoint"], r["path"]) for r in mine] == [(CHECKS[case.code].severity, ckpt, path)]
    for row in rows:  # a command line starts with its kind and names the checkpoint; an instruction has no request
        fix = row["fix"]
        assert fix["text"].startswith(f"wmcheck {fix['kind']} {ckpt}") if fix["request"] is not None else fix["kind"] == "instruction"
    table = list(csv.DictReader(io.StringIO(run_cli("check", ckpt, *args, "--format", "csv", exit_code=expected_exit(case)).stdout)))
    assert table == [{**{k: str(v) for k, v in r.items()}, "fix": fix_line(r["fix"])} for r in rows]


def fix_line(fix: dict) -> str:
    """A fix of check's JSON as the other formats print it."""
    return fix["text"] if fix["request"] is not None else f"by hand: {fix['text']}"


def test_every_fix_check_prints_is_a_command_that_repairs_its_break(broken):
    """Each command line check prints as a fix, run as printed (with --execute), changes the checkpoint and takes
    the finding away; the restart oracle proves with Spark that it makes the restart work."""
    case, root, path, args = broken
    ckpt = str(root / "checkpoint")
    rows = json.loads(run_cli("check", ckpt, *args, "--format", "json", exit_code=expected_exit(case)).stdout)
    fix = next(r["fix"] for r in rows if r["code"] == case.code)
    if fix["request"] is None:
        return
    words = shlex.split(fix["text"])
    doc = json.loads(run_cli(*words[1:], *([] if fix["kind"] == "undo" else ["--execute"]), "--idle", "0",
                             "--format", "json").stdout)
    assert doc["restored"] if fix["kind"] == "undo" else doc["steps"], doc  # not a no-op
    after = json.loads(run_cli("check", ckpt, *args, "--format", "json", exit_code=None).stdout)
    assert not [r for r in after if r["code"] == case.code], after


def test_table_and_strict(broken):
    case, root, path, args = broken
    ckpt = str(root / "checkpoint")
    out = run_cli("check", ckpt, *args, exit_code=expected_exit(case)).stdout
    line = next(line for line in out.splitlines() if f" {case.code} " in line)
    assert line.split()[:3] == [CHECKS[case.code].severity, case.code, path]
    status = "FAIL" if expected_exit(case) else "ok"
    assert out.splitlines()[-1].startswith(f"{ckpt}: {status}: ")
    run_cli("check", ckpt, *args, "--strict", "--format", "json", exit_code=expected_exit(case, strict=True))
    run_cli("check", ckpt, *args, "--ignore", ",".join([case.code, *case.also]), "--strict", exit_code=0)


def test_github_annotations(broken):
    case, root, path, args = broken
    ckpt = str(root / "checkpoint")
    out = run_cli("check", ckpt, *args, "--format", "github", exit_code=expected_exit(case)).stdout.splitlines()
    level = "error" if CHECKS[case.code].severity == "error" else "warning"
    file = os.path.normpath(os.path.join(ckpt, path)).replace(",", "%2C").replace(":", "%3A")
    title = f"{case.code} {CHECKS[case.code].title}".replace(",", "%2C").replace(":", "%3A")
    prefix = f"::{level} file={file},title={title}::"
    assert sum(line.startswith(prefix) for line in out) == 1, out
    assert out[-1].startswith(f"{ckpt}: ")


def test_junit_xml(broken, tmp_path):
    case, root, path, args = broken
    ckpt = str(root / "checkpoint")
    report = tmp_path / "report.xml"
    run_cli("check", ckpt, *args, "--format", "junit", "--output", report, exit_code=expected_exit(case))
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite.get("name") == ckpt
    cases = {c.get("name").split()[0]: c for c in suite.findall("testcase")}
    assert list(cases) == [c for c in CHECKS if c != "WM000"]
    assert int(suite.get("tests")) == len(cases)
    got = cases[case.code]
    if CHECKS[case.code].severity == "error":
        failure = got.find("failure")
        assert failure.get("type") == "error" and failure.get("message").startswith(f"{path}: ")
    else:
        assert got.find("failure") is None and got.find("system-out").text.startswith(f"warning: {path}: ")
    failed = {c for c, el in cases.items() if el.find("failure") is not None}
    assert failed == {c for c in [case.code, *case.also] if CHECKS[c].severity == "error"}
    assert int(suite.get("failures")) == len(failed)
    skipped = {c for c, el in cases.items() if el.find("skipped") is not None}
    assert skipped == (set() if case.sink else {c.code for c in CHECKS.values() if c.needs_sink})


# -- exact messages ----------------------------------------------------------------------------------------


def messages(root: Path, sink: bool = False) -> dict[str, str]:
    findings = check_checkpoint(open_checkpoint(str(root / "checkpoint")), str(root / "output") if sink else None)
    return {f.code: f.message for f in findings}


def fixes(root: Path, sink: bool = False) -> dict[str, Fix]:
    findings = check_checkpoint(open_checkpoint(str(root / "checkpoint")), str(root / "output") if sink else None)
    return {f.code: f.fix for f in findings}


def test_extra_partition_without_state_versions_is_named_not_a_crash(copy_fixture):
    """A repartition killed as Spark wrote a new partition: its SST file is there, the snapshot it belongs to not yet."""
    root = copy_fixture("dedup_rocksdb_p3")
    extra = root / "checkpoint" / "state" / "0" / "3" / "SSTs"
    extra.mkdir(parents=True)
    (extra / "000008-de427f84-a8be-44fd-8e37-996af9df11b2.sst").write_bytes(b"partial")
    [finding] = check_checkpoint(open_checkpoint(str(root / "checkpoint")))
    assert (finding.code, finding.path) == ("WM019", "state/0/3")
    assert finding.message.endswith("beyond it (state/0/3), holding no state version (an interrupted write, such as a "
                                    "killed repartition, may have left them): Spark does not read them at 3 partitions")


def test_parse_error_message_is_the_parsers(copy_fixture):
    root = copy_fixture("agg_window_hdfs")
    last = fixture_facts("agg_window_hdfs")["last_batch"]
    b_unparseable(root, fixture_facts("agg_window_hdfs"))
    data = (root / "checkpoint" / "offsets" / str(last)).read_bytes()
    with pytest.raises(CheckpointError) as exc:
        parse_offsets(data, f"offsets/{last}")
    assert messages(root)["WM001"] == (f"line 2: {exc.value.message} (hint: {exc.value.hint}) (a file of the last batch: "
                                       f"rewinding to batch {last - 1} drops it with its checksum files, and Spark plans "
                                       f"batch {last} again)")
    assert fixes(root)["WM001"] == repair.RewindRequest(to_batch=last - 1)


def test_unloadable_state_names_the_file_and_the_batch_to_rewind_to(copy_fixture):
    root = copy_fixture("agg_window_hdfs")
    facts = fixture_facts("agg_window_hdfs")
    last = facts["last_committed_batch"]
    b_unloadable(root, facts)
    text = messages(root)["WM016"]
    assert f"state version {last + 1}, which the next batch loads" in text
    assert f"state/0/1 has neither {last + 1}.delta nor {last + 1}.snapshot" in text
    assert f"batch {last - 1} is the newest batch whose state every partition can rebuild" in text
    assert fixes(root)["WM016"] == repair.RewindRequest(to_batch=last - 1)


def test_future_watermark_message_carries_the_numbers(copy_fixture):
    facts = fixture_facts("agg_window_hdfs")
    root = copy_fixture("agg_window_hdfs")
    b_future(root, facts)
    assert " is 2d 1.642s after the batch's processing time " in messages(root)["WM013"]
    assert fixes(root)["WM013"] == repair.RewindRequest(to_batch=facts["last_batch"] - 2)  # before commits/11


def test_a_refused_conf_value_names_the_value_and_the_fix(copy_fixture, tmp_path):
    """WM057 (not WM044's 'Spark restarts correctly'): the last offsets file's value is refused, an older file's is
    taken, so the rewind to before it; in every file, an instruction."""
    facts = fixture_facts("agg_window_hdfs")
    last = facts["last_batch"]
    root = copy_fixture("agg_window_hdfs")
    everywhere = tmp_path / "everywhere"
    shutil.copytree(root, everywhere)
    b_conf_refused(root, facts)
    assert messages(root) == {"WM057": (
        f"offsets/{last}, the offsets file Spark restarts from, pins spark.sql.streaming.join.stateFormatVersion = '5', "
        "which Spark 4.3 refuses (Spark accepts versions 1, 2, 3 and 4): it sets every pinned conf from that file on "
        "restart and fails at once ([INVALID_CONF_VALUE], whether or not an operator uses the conf); batch "
        f"{last - 1} pinned '2': the offsets files from batch {last} on come from another run or were edited, and a "
        f"rewind to before batch {last} drops them")}
    assert fixes(root)["WM057"] == repair.RewindRequest(to_batch=last - 1)
    b_conf_refused_everywhere(everywhere, facts)
    assert messages(everywhere) == {"WM057": (
        f"offsets/{last}, the offsets file Spark restarts from, pins spark.sql.streaming.stateStore.providerClass = "
        "'com.databricks.sql.streaming.state.RocksDBStateStoreProvider', which Spark 4.3 refuses (the class comes "
        "with another distribution's runtime, not with Apache Spark): it sets every pinned conf from that file on "
        "restart and fails when the first stateful operator opens its state store; every offsets file pins it, so "
        "the checkpoint was written by another Spark or distribution, or edited")}
    assert fixes(everywhere)["WM057"] == Instruction(
        "restart it with the Spark that wrote it, or set spark.sql.streaming.stateStore.providerClass in every offsets "
        "file to the value the query's state was written with, one Spark 4.3 accepts (offsets/12 decides the restart, "
        "an older file a rewind to its batch)")


def test_a_null_conf_value_is_refused_and_a_null_of_a_conf_spark_does_not_restore_is_not(copy_fixture):
    """A JSON null reaches setConfString as a null string: refused for every conf Spark restores (even the codec,
    before any store opens), ignored for any other key."""
    last = fixture_facts("agg_window_hdfs")["last_batch"]
    root = copy_fixture("agg_window_hdfs")
    edit_json(root / "checkpoint" / "offsets" / str(last), 1, lambda o: o["conf"].update(
        {"spark.sql.streaming.stateStore.compression.codec": None, "spark.sql.streaming.unknown": None}))
    assert messages(root) == {"WM057": (
        f"offsets/{last}, the offsets file Spark restarts from, pins spark.sql.streaming.stateStore.compression.codec = "
        "null, which Spark 4.3 refuses (a restored conf needs a value): it sets every pinned conf from that file on "
        "restart and fails at once ('requirement failed: value cannot be null for key', whether or not an operator "
        f"uses the conf); batch {last - 1} pinned 'lz4': the offsets files from batch {last} on come from another run "
        f"or were edited, and a rewind to before batch {last} drops them")}
    assert fixes(root)["WM057"] == repair.RewindRequest(to_batch=last - 1)


def test_a_sink_log_delete_of_a_file_still_there_is_an_error_with_a_rewind_and_not_an_unlisted_file(copy_fixture):
    """WM061: Spark's readers drop a file a delete entry names; WM034 does not also call the file a leftover to move
    out (the rewind needs it: the earlier batch's log names it again)."""
    facts = fixture_facts("agg_window_hdfs")
    last = facts["last_batch"]
    root = sink_at_home(copy_fixture("agg_window_hdfs"), "agg_window_hdfs")
    b_sink_file_deleted(root, facts)
    first = json.loads((root / "output/_spark_metadata" / str(last - 1)).read_text().split("\n")[1])["path"]
    assert messages(root, sink=True) == {"WM061": (
        f"the sink's log deletes 1 data file that the query wrote (e.g. {first}, in log batch {last}): Spark's file "
        "sink never writes a delete, but its readers drop every file a delete names (CompactibleFileStreamLog."
        "allFiles), so the query's output loses those rows (tested with Spark 4.3: rows missing, the restart itself "
        f"runs). The log was edited; a rewind to before batch {last} removes the deleting log file and Spark writes "
        "that batch again")}
    assert fixes(root, sink=True)["WM061"] == repair.RewindRequest(to_batch=last - 1, file_sink=str(root / "output"))


def broken_copy(copy_fixture, key: str) -> tuple[Path, dict]:
    """A copy of a case's fixture broken by BREAKS[key] (its logs naming the copy when the case checks the sink)."""
    case = BREAKS[key]
    root = copy_fixture(case.fixture)
    if case.sink:
        sink_at_home(root, case.fixture)
    facts = fixture_facts(case.fixture)
    case.apply(root, facts)
    return root, facts


def last_sink_entry(root: Path, batch: int) -> str:
    return json.loads((root / "output/_spark_metadata" / str(batch)).read_text().split("\n")[-1])["path"]


@pytest.mark.parametrize("key, what", [
    ("WM063", "1 entry field Spark's readers cannot read (e.g. size of {entry}: '1668', where Spark writes a number): "
              "every read of the sink fails (tested with Spark 4.3: 'No usable value for size')"),
    ("WM063-directory", '1 data file marked "isDir": true (e.g. {entry}): the sink\'s readers skip directories, so '
                        "those rows are lost to them (tested with Spark 4.3)"),
])
def test_a_sink_log_entry_spark_cannot_read_or_skips_is_an_error_with_a_rewind(copy_fixture, key, what):
    """WM063: json4s refuses a string where SinkFileStatus has a Long (every read of the sink fails); the readers skip
    an entry marked a directory."""
    root, facts = broken_copy(copy_fixture, key)
    last = facts["last_batch"]
    assert messages(root, sink=True) == {"WM063": (
        f"the sink's log has {what.format(entry=last_sink_entry(root, last))}. The query itself restarts; the log was "
        f"edited; a rewind to before batch {last} removes that log file and Spark writes that batch again")}
    assert fixes(root, sink=True)["WM063"] == repair.RewindRequest(to_batch=last - 1, file_sink=str(root / "output"))


def test_a_float_where_spark_writes_an_integer_is_read(copy_fixture):
    """json4s reads 1668.0 as 1668 (a restart probe with Spark 4.3 gave the control run's output): no finding."""
    root = sink_at_home(copy_fixture("agg_window_hdfs"), "agg_window_hdfs")
    b_log_entry("output/_spark_metadata", lambda e: e.update(size=float(e["size"])))(root, {})
    assert messages(root, sink=True) == {}


def test_a_source_log_entry_spark_cannot_read_is_an_error_to_restore(copy_fixture):
    root, _ = broken_copy(copy_fixture, "WM063-source")
    entry = json.loads((root / "checkpoint/sources/0/9.compact").read_text().split("\n")[-1])["path"]
    assert messages(root) == {"WM063": (
        f"1 field of the file source's log entries Spark cannot read (e.g. timestamp of {entry}: nothing, where Spark "
        "writes a number): Spark reads every entry of the newest compact file and the files after it when the query "
        "starts, and fails (tested with Spark 4.3: 'No usable value for timestamp'). The log was edited")}
    assert fixes(root)["WM063"] == Instruction("restore sources/0/9.compact from a backup")


SEEN_AGAIN = ("On restart Spark takes the files it has read from this log, so it sees the input files these entries "
              "stood for as new and reads them again in the next batch (tested with Spark 4.3: rows counted twice)")


def test_a_source_log_batch_without_files_is_input_read_again(copy_fixture):
    root, _ = broken_copy(copy_fixture, "WM064")
    assert messages(root) == {"WM064": (
        "sources/0: 9.compact names 9 input files not logged before it for its 10 log batches (Spark logs a batch only "
        f"for files it has not logged: lines were lost, or the file holds an earlier log batch's lines). {SEEN_AGAIN}")}
    assert fixes(root)["WM064"] == Instruction("restore sources/0/9.compact from a backup before restarting")


def test_a_rocksdb_zip_that_does_not_match_its_sidecar_fails_the_load_it_cannot_skip(copy_fixture):
    """session_window_p3 keeps no changelogs: 3.zip copied over 4.zip, its sidecar left, fails Spark's unzip
    (ChecksumException; restart oracle) and no older zip rebuilds version 4. WM039, not WM030's 'restarts fine'."""
    root = copy_fixture("session_window_p3")
    shutil.copy2(root / "checkpoint/state/0/0/3.zip", root / "checkpoint/state/0/0/4.zip")
    found = messages(root)
    assert set(found) == {"WM039"}
    assert found["WM039"].startswith("does not match its checksum file .4.zip.crc (chunk 0 (bytes 0-511) has CRC32 "
                                     "5c8c0fc2, the sidecar says 2d75f08f) (Spark unzips the snapshot through Hadoop's checksummed file system: "
                                     "ChecksumException): Spark fails to load state version 4 of state/0/0")


def test_a_source_log_entry_of_another_batch_is_still_a_file_spark_has_seen(copy_fixture):
    """The last entry of sources/0/9.compact relabelled batch 8: Spark restores the file as seen all the same (a restart
    probe with Spark 4.3 gave the control run's output), so no finding."""
    root = copy_fixture("agg_window_hdfs")
    b_log_entry("checkpoint/sources/0", lambda e: e.update(batchId=8))(root, {})
    assert messages(root) == {}


def test_a_bare_logged_path_of_an_input_file_is_input_read_again(copy_fixture):
    root, _ = broken_copy(copy_fixture, "WM064-bare-path")
    assert messages(root, sink=True) == {"WM064": (
        f"sources/0: 1 logged path without a scheme (e.g. {root}/input/run2-002.json; Spark logs and lists file: "
        f"URIs). {SEEN_AGAIN}")}


def test_a_logged_path_spelled_otherwise_than_the_listing_is_input_read_again(copy_fixture):
    """Spark matches the files it has read by the logged string: ``file:/in/run2%2D002.json`` among ``file:///in/...``
    entries is not how its listing spells ``/in/run2-002.json`` (restart probe: read again)."""
    root, _ = broken_copy(copy_fixture, "WM064-spelled")
    assert messages(root, sink=True) == {"WM064": (
        f"sources/0: 1 logged path spelled otherwise than Spark's listing spells the file (e.g. file:{root}/input/"
        f"run2%2D002.json, listed as file://{root}/input/run2-002.json; Spark matches the files it has read by that "
        f"string). {SEEN_AGAIN}")}
    assert fixes(root, sink=True)["WM064"] == Instruction("restore sources/0/9.compact from a backup before restarting")


def test_logged_paths_spelled_alike_are_not_judged_by_form():
    """Every entry in one form (``file:/`` as a query given a bare path logs them), or no form most entries share:
    nothing to tell Spark's listing by; a quoted path is judged by its quoting."""
    assert misspelled({"file:/in/a-1.json", "file:/in/a-2.json"}) == {}
    assert misspelled({"file:/in/a-1.json", "file:///in/a-2.json"}) == {}
    assert misspelled({"file:///in/a b.json", "file:///in/c%20d.json", "file:///in/%C3%A9.json", "file:///in/é.json"}) == {
        "file:///in/a b.json": "file:///in/a%20b.json", "file:///in/%C3%A9.json": "file:///in/é.json"}
    assert misspelled({"file://localhost/in/a.json", "file:///in/b.json", "file:///in/c.json"}) == {
        "file://localhost/in/a.json": "file:///in/a.json"}
    assert misspelled({"file:///in//a.json", "file:///in/./b.json", "file:///in/c.json"}) == {
        "file:///in//a.json": "file:///in/a.json", "file:///in/./b.json": "file:///in/b.json"}


def test_a_sink_entry_path_is_taken_as_spark_normalizes_it(copy_fixture):
    """Readers take a sink entry as ``new Path(new URI(path))``: repeated slashes and ``.`` segments normalized away,
    so ``file:/…//output/./part-…`` is a file of the sink (restart probe: the control run's output)."""
    root = copy_fixture("agg_window_hdfs")
    sink_at_home(root, "agg_window_hdfs")
    b_log_entry("output/_spark_metadata", lambda e: e.update(path=e["path"].replace("/output/", "//output/./")))(root, {})
    assert not {"WM033", "WM047", "WM063"} & set(messages(root, sink=True))


def test_a_conf_value_of_another_json_type_than_a_string_fails_the_offsets_file(copy_fixture):
    """json4s reads the conf as Map[String, String]: a number is taken as its text, a boolean fails the file
    (restart probe: 'No usable value for conf ... JBool(true)'), in the fast reading of Spark's key order too."""
    root, _ = broken_copy(copy_fixture, "WM001-conf-boolean")
    assert messages(root)["WM001"].startswith(
        "line 2: expected conf spark.sql.streaming.statefulOperator.useStrictDistribution to be a string, found true: "
        "Spark's reader takes a string or a number only and fails on the whole file ('No usable value for conf')")
    assert fixes(root)["WM001"] == repair.RewindRequest(to_batch=11)
    b_conf_value(root, fixture_facts("agg_window_hdfs"), 1)
    assert "WM001" not in messages(root)


def test_a_sink_file_named_with_another_authority_is_lost_to_readers(copy_fixture):
    """Readers keep the logged files whose parent is the sink's directory as a Hadoop path: file://localhost/ among
    file:/// entries is another directory (restart probe: its rows missing); file:/ is the same one."""
    root, _ = broken_copy(copy_fixture, "WM063-authority")
    message = messages(root, sink=True)["WM063"]
    assert message.startswith("the sink's log has 1 data file of the sink's directory named with another scheme or "
                              f"authority than its other files (e.g. file://localhost{root}/output/part-")
    assert fixes(root, sink=True)["WM063"] == repair.RewindRequest(to_batch=11, file_sink=str(root / "output"))
    b_log_entry("output/_spark_metadata", lambda e: e.update(path=e["path"].replace("file://localhost/", "file:/")))(root, {})
    assert "WM063" not in messages(root, sink=True)


def test_operator_metadata_naming_an_operator_spark_does_not_have_fails_the_restart(copy_fixture):
    """Spark compares the metadata's operator names with the query's exactly (restart probe: StateStoreSave fails
    with STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA; deleting the v1 file: the control run)."""
    root, _ = broken_copy(copy_fixture, "WM046-unknown-name")
    assert messages(root)["WM046"].startswith(
        "the operator metadata names operator 0 'StateStoreSave', a name Spark gives no operator (it writes "
        "StatefulStreamlineAggregate, applyInPandasWithState, dedupe, ")
    assert fixes(root)["WM046"] == Instruction(
        "while the query is stopped, delete state/0/_metadata/metadata with its checksum file: Spark writes it again "
        "from the query when it starts")


def test_a_bare_logged_path_of_a_file_that_is_gone_is_not_read_again(copy_fixture):
    root, _ = broken_copy(copy_fixture, "WM064-bare-path")
    (root / "input/run2-002.json").unlink()
    assert "WM064" not in messages(root, sink=True)


def b_old_input(root: Path) -> str:
    """A new input file copied in with a modification time a month before the newest file the source logged."""
    path = root / "input" / "copied.json"
    path.write_text('{"id":"a","ts":"2024-01-01T00:00:01Z","v":1}\n')
    os.utime(path, (1704069220 - 30 * 86400, 1704069220 - 30 * 86400))
    return "sources/0"


def b_join_store_of_the_version_before(root: Path, store: str) -> str:
    """join_stream_stream's partition 0: a store's 8.delta (and its sidecar) replaced by its 7.delta, the side's other
    store left at version 8 (a restore that mixed versions)."""
    folder = root / "checkpoint/state/0/0" / store
    for name in ("7.delta", ".7.delta.crc"):
        shutil.copy2(folder / name, folder / name.replace("7", "8"))
    return f"state/0/0/{store}"


def test_join_counts_of_another_version_than_the_rows_fail_with_a_rewind(copy_fixture):
    """WM068: left-keyToNumValues at version 7 (its 8.delta replaced by 7.delta), its rows at version 8: key 'a'
    counts 2 rows, the second is gone (Spark 4.3: 'Value at index 1 is null while numValues is 2'); version 7 of both
    agrees, so the rewind to batch 6."""
    root, _ = broken_copy(copy_fixture, "WM068")
    assert messages(root) == {"WM068": (
        "state/0/0/left-{keyToNumValues,keyWithIndexToValue}: as the next batch loads them (version 8), "
        "left-keyToNumValues counts rows that left-keyWithIndexToValue does not hold for 2 join keys, e.g. key ('a'): "
        "2 rows, none at index 1 (the two stores' files are of different versions: a restore or copy that mixed them). "
        "Spark fails when it reads that key, at the latest when it evicts the side's rows "
        "('[STREAM_STREAM_JOIN_INCONSISTENT_STATE.NULL_VALUE] Detected inconsistency in stream-stream join state', "
        "tested with Spark 4.3; Spark 3.5: 'NullPointerException: … \"valuePair\" is null', tested); with "
        "spark.sql.streaming.stateStore.skipNullsForStreamStreamJoins.enabled it skips "
        "the missing rows: they are lost to the join; the newest version whose two stores agree is 7: a rewind to the "
        "batch before it (where batch 6 is the newest batch whose state every partition can rebuild) makes Spark load "
        "it and write the later versions again")}
    assert fixes(root)["WM068"] == repair.RewindRequest(to_batch=6)


def test_rocksdb_join_counts_of_another_version_than_the_rows_are_found_in_the_snapshots(copy_fixture):
    """WM068 on RocksDB (join_v2_p3, snapshots only): every partition's left-keyToNumValues/4.zip replaced by its 3.zip;
    partition 2's counts name rows of keys 'a' and 'b' that its rows of version 4 lack (batch 3 evicted them)."""
    root = copy_fixture("join_v2_p3")
    for p in range(3):
        folder = root / f"checkpoint/state/0/{p}/left-keyToNumValues"
        for name in ("3.zip", ".3.zip.crc"):
            shutil.copy2(folder / name, folder / name.replace("3", "4"))
    found = check_checkpoint(open_checkpoint(str(root / "checkpoint")), None)
    assert [(f.code, f.path) for f in found] == [("WM068", "state/0/2/left-keyToNumValues")]
    assert "for 2 join keys, e.g. key ('a'): 2 rows, none at index 1" in found[0].message
    assert found[0].fix == repair.RewindRequest(to_batch=2)


def test_join_state_is_judged_within_a_budget_of_bytes_read(copy_fixture, monkeypatch):
    """WM068 reads join state files up to READ_LIMIT bytes: past it a load is not judged and a note says so."""
    from wmcheck.checkpoint.checks import join_state

    root, _ = broken_copy(copy_fixture, "WM068")
    monkeypatch.setattr(join_state, "READ_LIMIT", 100)
    done = run_cli("check", str(root / "checkpoint"), "--format", "json")
    assert json.loads(done.stdout) == [] and ("note: WM068 reads 100 bytes of join state files per check and left the "
                                              "rest unjudged (their value counts are not compared with their rows)\n"
                                              ) in done.stderr
    monkeypatch.setattr(join_state, "READ_LIMIT", 32 << 20)
    done = run_cli("check", str(root / "checkpoint"), "--format", "json", exit_code=1)
    assert [f["code"] for f in json.loads(done.stdout)] == ["WM068"] and "note: WM068" not in done.stderr


def test_a_group_the_last_batch_timed_out_back_in_the_next_load_is_an_error_with_a_rewind(copy_fixture):
    """WM069: pandas_state_p3 (applyInPandasWithState, event-time timeout, append) with every partition's 4.zip
    replaced by its 3.zip: partition 2 holds a group whose timeout (00:00:19) is below batch 3's watermark
    (00:00:20), which Spark had timed out (the function emitted and removed it)."""
    root, _ = broken_copy(copy_fixture, "WM069")
    assert messages(root) == {"WM069": (
        "state version 4 of state/0/2, which the next batch loads, holds 1 group of operator 0 (applyInPandasWithState) "
        "that batch 3 had already ended before it wrote that version (timeouts before 2024-01-01T00:00:20.000Z, below "
        "both the eviction watermark and the processing time of batch 3; e.g. 2024-01-01T00:00:19.000Z): a file of it "
        "is not the one Spark wrote (an older version's, another partition's). Spark loads it without an error and ends "
        "those groups again in the next batch: their rows are emitted a second time, or their state continues from an "
        "old value (tested with Spark 4.3: the restart's output differs from a control run); rewinding to batch 2, "
        "keeping offsets/3, makes Spark load state version 3 and run batch 3 again as it was planned (its offsets and "
        "watermark: a batch planned anew with new input would end other groups), writing version 4 anew")}
    assert fixes(root)["WM069"] == repair.RewindRequest(to_batch=2, keep_next_offsets=True)


def test_groups_timed_out_in_the_state_of_an_operator_feeding_another_are_not_judged(copy_fixture):
    """fmgws_then_agg (applyInPandasWithState is operator 1, an aggregation operator 0): each partition's 9.delta
    replaced by its 8.delta brings back a group batch 8 had timed out; what it emits again reaches the output only as
    the aggregation's watermark lets it (the oracle's upstream-group-state case: the control run's output). The same
    copy in the operator writing to the sink is judged (pandas_state_timeout: HDFS deltas)."""
    root = copy_fixture("fmgws_then_agg")
    for p in (0, 1):
        folder = root / f"checkpoint/state/1/{p}"
        for name in ("8.delta", ".8.delta.crc"):
            shutil.copy2(folder / name, folder / name.replace("8", "9"))
    assert "WM069" not in messages(root)
    root = copy_fixture("pandas_state_timeout")
    folder = root / "checkpoint/state/0/0"
    for name in ("8.delta", ".8.delta.crc"):
        shutil.copy2(folder / name, folder / name.replace("8", "9"))
    found = [f for f in check_checkpoint(open_checkpoint(str(root / "checkpoint")), None) if f.code == "WM069"]
    assert [f.path for f in found] == ["state/0/0"]
    assert "of operator 0 (applyInPandasWithState) that batch 8 had already ended" in found[0].message


def test_timers_the_last_batch_fired_back_in_the_next_load_are_found(copy_fixture):
    """WM069 for transformWithState (tws_pandas, event-time timers in the column family $eventTimers_timestampToKey
    of its RocksDB snapshots): each partition's 9.zip replaced by its 8.zip holds a timer at or before batch 8's
    eviction watermark (00:01:10), which Spark had fired and deleted."""
    root = copy_fixture("tws_pandas")
    newest_state_back(root)
    found = [f for f in check_checkpoint(open_checkpoint(str(root / "checkpoint")), None) if f.code == "WM069"]
    assert [f.path for f in found] == ["state/0/0", "state/0/1"]
    assert ("holds 1 timer of operator 0 (transformWithStateInPandasExec) that batch 8 had already ended before it "
            "wrote that version (timers at or before 2024-01-01T00:01:10.000Z, the eviction watermark of batch 8; e.g. "
            "2024-01-01T00:01:00.000Z)") in found[0].message
    assert found[0].fix == repair.RewindRequest(to_batch=7, keep_next_offsets=True)


def test_sessions_the_last_batch_closed_are_judged_in_append_mode_only(copy_fixture):
    """WM069 for session windows (session_window_p3, every partition's newest zip replaced by the one before): sessions
    ending at or before batch 3's eviction watermark. Complete mode keeps such sessions, so without a file sink (append
    only), an event log printing append mode, or a removal in the operator's files, they are not judged."""
    root, _ = broken_copy(copy_fixture, "WM069-sessions")
    found = messages(root, sink=True)
    assert "holds 2 sessions of operator 0 (sessionWindowStateStoreSaveExec) that batch 3 had already ended" in found["WM069"]
    assert "WM069" not in messages(root)


def test_join_rows_of_the_version_before_beyond_the_counts_are_no_finding(copy_fixture):
    """left-keyWithIndexToValue at version 7, its counts at version 8: batch 7 removed rows there, so the rows left
    lie beyond the counts, where Spark never reads (a restart probe with Spark 4.3 gave the control run's output)."""
    root = copy_fixture("join_stream_stream")
    b_join_store_of_the_version_before(root, "left-keyWithIndexToValue")
    assert messages(root) == {}


def test_join_state_is_not_judged_without_content(copy_fixture):
    root, _ = broken_copy(copy_fixture, "WM068")
    found = check_checkpoint(open_checkpoint(str(root / "checkpoint")), None, content=False)
    assert "WM068" not in {f.code for f in found}


LAST_BATCH_MS = 1795386142052
"""agg_window_hdfs: offsets/12's batchTimestampMs."""


def test_a_logged_input_file_time_past_the_file_age_hides_new_files(copy_fixture):
    """WM067: a time 30 days after the last batch's in sources/0/9.compact; the rewind to before batch 11, which
    logged it (the log edited: the file's modification time on disk is the last batch's, set here so that the test does
    not depend on when the repository was checked out)."""
    root, _ = broken_copy(copy_fixture, "WM067")
    os.utime(root / "input/run2-002.json", (LAST_BATCH_MS / 1000, LAST_BATCH_MS / 1000))
    assert messages(root) == {"WM067": (
        f"sources/0: 1 logged input file with a time more than 7 days after the last batch's (2026-11-22T22:22:22.052Z), "
        f"e.g. file://{root}/input/run2-002.json at 2026-12-22T22:22:22.052Z (log batch 9). On restart the file source "
        "takes its seen files' times from the log and forgets, and never reads, any file older than the newest logged "
        "time minus maxFileAge (FileStreamSource.SeenFilesMap: 2026-12-22T22:22:22.052Z minus 7 days by default; not "
        "with latestFirst and maxFilesPerTrigger or maxBytesPerTrigger), so every input file written until "
        "2026-12-15T22:22:22.052Z is skipped without an error (tested with Spark 4.3: the new input is never read); a "
        "rewind to before batch 11, which logged it, makes Spark list and read those files again")}
    assert fixes(root)["WM067"] == repair.RewindRequest(to_batch=10)


def test_a_logged_input_file_time_of_a_skewed_clock_is_set_before_the_rewind(copy_fixture):
    """WM067: the input file's modification time on disk as far ahead as its logged time (its writer's clock): Spark
    would log it again after a rewind alone, so the fix is an instruction to set it first."""
    root, _ = broken_copy(copy_fixture, "WM067")
    ahead = (LAST_BATCH_MS + 30 * DAY_MS) / 1000
    os.utime(root / "input/run2-002.json", (ahead, ahead))
    assert fixes(root)["WM067"] == Instruction(
        "set the modification time of the input files logged with these times to when they were written (touch -m "
        f"{root}/input/run2-002.json), then rewind to batch 10 with the file sink (wmcheck rewind CKPT --to-batch 10 "
        "--file-sink SINK --execute)")
    assert "its file's modification time on disk too" in messages(root)["WM067"]


def test_an_unread_input_file_older_than_the_purge_threshold_is_never_read(copy_fixture):
    """WM071: a new file in agg_window_hdfs's input, its modification time 8 days before the newest logged time
    (2024-01-01T00:33:40Z): Spark never reads it; the instruction sets its time to now. Hidden names and logged files
    are not reported, nor a file a day older."""
    root = copy_fixture("agg_window_hdfs")
    sink_at_home(root, "agg_window_hdfs")
    newest_s = 1704069220
    for name, age_days in (("late.json", 8), ("_hidden.json", 8), (".hidden.json", 8), ("recent.json", 1)):
        path = root / "input" / name
        path.write_text('{"id":"a","ts":"2024-01-01T00:00:01Z","v":1}\n')
        os.utime(path, (newest_s - age_days * 86400, newest_s - age_days * 86400))
    os.utime(root / "input/run0-000.json", (newest_s - 30 * 86400, newest_s - 30 * 86400))  # logged: read already
    assert messages(root) == {"WM071": (
        f"1 file in the input directory {root}/input that the source has not read, e.g. {root}/input/late.json, is "
        "older than the newest time its log records minus maxFileAge (2023-12-25T00:33:40.000Z: "
        "FileStreamSource.SeenFilesMap, 7 days by default; not with latestFirst and maxFilesPerTrigger or "
        "maxBytesPerTrigger): Spark takes a file as new only when it is not older than that, so it never reads them "
        "and says nothing (tested with Spark 4.3: a new input file with a modification time a month old is not read). "
        "A file copied in with its old modification time (cp -p, rsync -t, an archive) does this")}
    assert fixes(root)["WM071"] == Instruction(
        f"set the modification time of these files to now (touch -m {root}/input/late.json) before the query lists them")
    os.utime(root / "input/late.json")
    assert messages(root) == {}


@pytest.mark.parametrize("days, found", [(6, False), (8, True)])
def test_logged_input_file_times_within_the_file_age_are_no_finding(copy_fixture, days, found):
    """Six days after the last batch's time: a file written at or after it is newer than the purge threshold; eight
    days: it is not."""
    root = copy_fixture("agg_window_hdfs")
    b_log_entry("checkpoint/sources/0", lambda e: e.update(timestamp=LAST_BATCH_MS + days * DAY_MS))(root, {})
    assert ("WM067" in messages(root)) == found


def test_the_last_offsets_watermark_above_its_commit_is_an_error_with_a_rewind(copy_fixture):
    root, facts = broken_copy(copy_fixture, "WM065")
    last = facts["last_batch"]
    assert messages(root) == {"WM065": (
        f"batchWatermarkMs 1704070885000 (2024-01-01T01:01:25.000Z) is 1h above the nextBatchWatermarkMs 1704067285000 "
        f"(2024-01-01T00:01:25.000Z) of commits/{last}, and above every event time the query has seen "
        "(2024-01-01T00:01:35.000Z, that watermark plus the query's delay): Spark computes the next watermark from this "
        f"batch's and never lowers it, and wmcheck set-watermark writes both, so offsets/{last} was edited. The next "
        "batch drops rows older than 2024-01-01T01:01:25.000Z as late, new ones too, and evicts state by it (tested with "
        f"Spark 4.3: raised by an hour, the new rows are dropped); a rewind to before batch {last} makes Spark plan it "
        f"again with the watermark batch {last - 1} passed on")}
    assert fixes(root)["WM065"] == repair.RewindRequest(to_batch=last - 1)


def _last_watermarks(root: Path, last: int, offsets: int = 0, commit: int = 0) -> None:
    """Move the last batch's watermark in its offsets file and its commit by hand."""
    edit_json(root / "checkpoint" / "offsets" / str(last), 1, lambda o: o.update(batchWatermarkMs=o["batchWatermarkMs"] + offsets))
    edit_json(root / "checkpoint" / "commits" / str(last), 1,
              lambda o: o.update(nextBatchWatermarkMs=o["nextBatchWatermarkMs"] + commit))


@pytest.mark.parametrize("name,offsets,commit", [
    ("agg_window_hdfs", 1000, 0),  # raised a second: below every event time seen (the delay is 10 s)
    ("agg_window_hdfs", 0, -3_600_000),  # the commit lowered where the batch read no input: Spark takes the larger
    ("agg_window_hdfs", 0, 1000),  # the commit raised a second in a batch without input
    ("dedup_watermark", 0, 3_600_000),  # raised an hour where no operator emits what it evicts
    ("tws_ttl", 3_600_000, -3_600_000),  # no operator drops rows or evicts by the watermark (processing time)
])
def test_last_watermarks_edited_without_effect_are_not_reported(copy_fixture, name, offsets, commit):
    root = copy_fixture(name)
    _last_watermarks(root, fixture_facts(name)["last_batch"], offsets, commit)
    assert not {"WM065", "WM079"} & set(messages(root))


def test_a_commit_lowered_below_a_batch_that_read_input_is_an_error_to_restore_it(copy_fixture):
    root = copy_fixture("python_source")
    _last_watermarks(root, 2, commit=-3_600_000)
    assert messages(root) == {"WM065": (
        "nextBatchWatermarkMs 1704063685000 (2023-12-31T23:01:25.000Z) is 59m 28s below the watermark batch 2 ran with "
        "(2024-01-01T00:00:53.000Z): Spark computes the next watermark from that one and the event times the batch "
        "read, never lower, so commits/2 was edited. Batch 2 read new input and may have moved the watermark: the next "
        "batch evicts state and emits by 2024-01-01T00:00:53.000Z only, later than Spark would have (tested with Spark "
        "4.3: other output than the control run's)")}
    assert fixes(root)["WM065"] == Instruction(
        "restore commits/2 from a backup before restarting (a rewind makes Spark run batch 2 again, with the input that "
        "has arrived since in other batches than the ones it ran)")


def test_a_commit_raised_in_a_batch_without_input_is_an_error_with_a_rewind(copy_fixture):
    root, facts = broken_copy(copy_fixture, "WM079")
    last = facts["last_batch"]
    assert messages(root) == {"WM079": (
        f"nextBatchWatermarkMs 1704070885000 (2024-01-01T01:01:25.000Z) is 1h above the watermark batch {last} ran with "
        "(2024-01-01T00:01:25.000Z), although the batch read no input: the watermark moves only with the event times of "
        f"new rows, so commits/{last} was edited, beyond every event time the query has seen (2024-01-01T00:01:35.000Z). "
        "The next batch evicts state by it: windows, sessions and timeouts are emitted before the rows that belong to "
        "them arrive, and those rows are then dropped as late (tested with Spark 4.3: raised by an hour, other output "
        f"than the control run's); a rewind to before batch {last} makes Spark run it again and pass on its own "
        "watermark")}
    assert fixes(root)["WM079"] == repair.RewindRequest(to_batch=last - 1)


def test_set_watermark_raising_the_last_batch_is_not_an_edit(copy_fixture):
    """set-watermark writes offsets/L and commits/L alike, so WM065 stays silent after it."""
    root = copy_fixture("agg_window_hdfs")
    run_cli("set-watermark", str(root / "checkpoint"), "--watermark", "1704070885000", "--allow-raise", "--execute",
            "--idle", "0")
    assert "WM065" not in messages(root)


def test_a_format_2_batch_the_sink_already_has_is_an_error_with_a_rewind_with_the_sink(copy_fixture):
    """WM066: checkpoint_v2 stopped between the file sink's commit of batch 12 and commits/12."""
    root, facts = broken_copy(copy_fixture, "WM066")
    last = facts["last_batch"]
    assert messages(root, sink=True) == {"WM066": (
        f"batch {last} is planned but not committed, and the file sink has already committed it (a stop between the "
        f"sink's commit and commits/{last}). On restart Spark re-runs batch {last}, its file sink skips a batch it "
        "already has without running it, so no state store reports the state it wrote, and with checkpoint format 2 "
        "Spark fails before it commits the batch (tested with Spark 4.3: 'assertion failed: CheckpointInfo length: 0'); "
        f"a rewind to before batch {last}, with the sink, makes Spark write the batch again")}
    assert fixes(root, sink=True)["WM066"] == repair.RewindRequest(to_batch=last - 1, file_sink=str(root / "output"))


def test_the_first_sink_log_file_gone_is_a_gap_only_a_backup_fills(copy_fixture):
    """WM031 before any compact file: Spark's readers and its compaction read the sink's log from batch 0."""
    root, _ = broken_copy(copy_fixture, "WM031-first")
    assert messages(root, sink=True)["WM031"] == (
        "the file sink's log has no batch 0 although it holds batches up to 7: Spark's readers of the sink fail now "
        "(FileNotFoundException: .../_spark_metadata/0 doesn't exist), and the query fails at batch 9, its next "
        "compaction ('[BATCH_METADATA_NOT_FOUND] Unable to find batch .../_spark_metadata/0'); no committed batch comes "
        "before it, so only a backup of the log brings it back")
    assert fixes(root, sink=True)["WM031"] == Instruction(
        "restore ../output/_spark_metadata/0 from a backup; without one, start the query from a new checkpoint and an "
        "empty output directory")


def test_the_first_source_log_file_gone_is_read_at_start_and_only_a_backup_fills_it(copy_fixture):
    """WM022 before any compact file: the file source restores its seen files from log batch 0 when the query
    starts, so every committed batch depends on it."""
    root, _ = broken_copy(copy_fixture, "WM022-first")
    assert messages(root) == {"WM022": (
        "offsets/7 points at log batch 5 of sources/0, but log batch 0 is missing (the log ends at 5): Spark cannot "
        "list the files of the batch and fails, or writes new log batches over ids it already used (Spark reads the "
        "log from log batch 0 when the query starts: tested with Spark 4.3, 'sources/0/0 doesn't exist'); every "
        "committed batch read it, so only a backup brings it back")}
    assert fixes(root)["WM022"] == Instruction("restore sources/0/0 from a backup, or start the query from a new checkpoint")


def test_a_source_log_fix_names_no_rewind_spark_cannot_restart_from(copy_fixture):
    """compaction keeps offsets/10 to 12: batch 10 read log batches up to 8 only, but a rewind to it leaves offsets/10
    the last offsets file without offsets/9 ('batch 9 doesn't exist'), so log batch 9 gone is fixed by hand."""
    root = copy_fixture("compaction")
    (root / "checkpoint/sources/0/9").unlink()
    found = fixes(root)
    assert found["WM022"] == Instruction("restore sources/0/9 from a backup, or start the query from a new checkpoint")
    assert found["WM029"] == Instruction("delete sources/0/.9.crc while the query is stopped")


def test_an_hdfs_delta_deleting_a_key_the_version_before_lacks_is_not_the_one_spark_wrote(copy_fixture):
    """compaction's state/0/1/12.delta replaced by its 11.delta: the delete of the window batch 10 evicted comes again
    (whether the output needed the lost delta nothing tells: a warning, and the rewind runs batch 11 again)."""
    root = copy_fixture("compaction")
    state = root / "checkpoint/state/0/1"
    shutil.copy2(state / "11.delta", state / "12.delta")
    assert messages(root)["WM078"] == (
        "state/0/1/12.delta, a delta of state version 12 that the next batch loads (version 13), deletes a key that "
        "version 11 does not hold: Spark's HDFS-backed store writes a delete only for a key it removed, so this is not "
        "the file Spark wrote for version 12 (an older delta of the partition copied over it, or another partition's). "
        "Spark loads it without an error, and whatever the lost delta held is gone: nothing here tells whether the "
        "output needed it (state_types's state/0/1/10.delta replaced by its 9.delta restarts with the control run's "
        "output, tested); batch 10 is the newest "
        "batch whose state every partition can rebuild; offsets/9 is gone, so the rewind keeps offsets/11 (Spark "
        "restarts from it and reads offsets/10) and batch 11 runs again as it was planned")
    assert fixes(root)["WM078"] == repair.RewindRequest(to_batch=10, keep_next_offsets=True)
    shutil.copy2(state / "10.delta", state / "12.delta")  # an empty delta: deletes nothing, nothing to see
    assert "WM078" not in messages(root)


@pytest.mark.parametrize("name", ["compaction", "state_types", "union_stall_max"])
def test_deletes_of_absent_keys_are_found_column_wise_as_record_by_record(copy_fixture, monkeypatch, name):
    """WM078 reading an HDFS load's records at once (sized_columns: fingerprints grouped in chain order) finds what
    reading them record by record finds, on the fixture and with each partition's newest delta replaced by the ones
    one and two versions before (deletes of keys already gone among them)."""
    from wmcheck.checkpoint.checks import deltas
    from wmcheck.checkpoint.checks import state as state_checks

    decided: list = []
    real = deltas._absent_delete_columns
    monkeypatch.setattr(deltas, "_absent_delete_columns", lambda *a: decided.append(real(*a)) or decided[-1])
    root = copy_fixture(name)
    newest = {}
    for delta in (root / "checkpoint/state/0").glob("*/*.delta"):
        newest[delta.parent] = max(newest.get(delta.parent, 0), int(delta.name.split(".")[0]))
    reports = []
    for back in (0, 1, 2):
        for folder, version in newest.items():
            if back and (folder / f"{version - back}.delta").exists():
                shutil.copy2(folder / f"{version - back}.delta", folder / f"{version}.delta")
        found = {}
        for columnar in (True, False):
            monkeypatch.setattr(state_checks, "COLUMNAR", columnar)
            found[columnar] = [f.message for f in check_checkpoint(open_checkpoint(str(root / "checkpoint"))) if f.code == "WM078"]
        assert found[True] == found[False], back
        reports.append(len(found[True]))
    assert any(d is not None for d in decided)  # the columns decided, not the reference alone
    if name in ("compaction", "state_types"):
        assert any(reports)  # a copy deleting a key already gone was among them


def test_a_log_file_of_the_other_source_is_input_read_again(copy_fixture):
    """Only the source whose log holds the other's file is named: the other's log names it among its own files."""
    root, _ = broken_copy(copy_fixture, "WM064-mixed")
    left = json.loads((root / "checkpoint/sources/0/5").read_text().split("\n")[1])["path"]
    assert messages(root)["WM064"] == (
        f"sources/1: 1 entry naming files that source 0's log names, outside the directories of this source's other "
        f"files (e.g. {left}: a log file copied from the other source's log). {SEEN_AGAIN}")
    assert fixes(root)["WM064"] == Instruction("restore sources/1/5 from a backup before restarting")


def test_a_transformwithstate_schema_of_another_query_is_named_with_the_families_it_lacks(copy_fixture):
    root, _ = broken_copy(copy_fixture, "WM046-tws")
    assert messages(root, sink=True)["WM046"] == (
        "the operator metadata of operator 0 transformWithStateInPandasExec names state variables (with their TTL) that "
        f"{TTL_SCHEMA} has no column family for ($ttl_count, $procTimers_keyToTimestamp, $ttl_events, $ttl_last_by_v): "
        "the schema file or the metadata comes from another query. Spark checks the query's state against the schema "
        "file when it starts and fails (tested with Spark 4.3: '[STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE]' for "
        "tws_pandas's schema file in tws_ttl)")
    assert fixes(root, sink=True)["WM046"] == Instruction(f"restore {TTL_SCHEMA} from a backup")


def test_a_format_1_batch_the_sink_already_has_is_the_crash_spark_recovers_from(copy_fixture):
    root = sink_at_home(copy_fixture("agg_window_hdfs"), "agg_window_hdfs")
    b_last_commit_lost(root, fixture_facts("agg_window_hdfs"))
    assert messages(root, sink=True) == {}


def test_state_files_of_another_partition_are_named_with_the_partition_their_keys_go_to(copy_fixture):
    root = copy_fixture("agg_window_hdfs")
    b_foreign_partition(root, fixture_facts("agg_window_hdfs"))
    assert messages(root) == {"WM058": (
        "state/0/0 holds keys of another partition in 2.delta, 3.delta, 4.delta, 5.delta, 6.delta, 7.delta, 9.delta (a "
        "key of 2.delta hashes to partition 1 of 3, as Spark partitions operator 0's input): the file comes from "
        "another partition's directory (a restore or copy mixed partitions up); Spark loads it without an error, and "
        "those keys sit where no batch sends their rows, while this partition's own are gone: rows are emitted twice "
        "or lost (tested: the restart's output differs from a control run); a file without a key of another partition "
        "may come from there too (one with no rows), so no rewind can tell which versions to keep")}
    assert fixes(root)["WM058"] == Instruction("restore state/0/0 from a backup of this checkpoint (every file of it)")


def evicted_message(directory: str, files: str) -> str:
    return (
        f"state version 13 of {directory}, which the next batch loads ({files}), holds 1 key of operator 0 whose "
        "window.end is at or before 2024-01-01T00:01:25.000Z, the eviction watermark of batch 12 (e.g. window.end "
        "2024-01-01T00:01:20.000Z); batch 12 removed every such key before it wrote that version, so a file of it is "
        "not the one Spark wrote (another partition's, an older version's, or a lost increment over an older snapshot: "
        "a file with no row of its own shows nothing else). Spark loads it without an error and removes those keys "
        "again in the next batch: in append mode it emits their rows a second time (duplicate output; tested: the "
        "restart's output differs from a control run), in update mode it drops them, and the changes the lost file "
        "held are gone in either; rewinding to batch 11 makes Spark load state version 12 and run the batches after "
        "it again, writing version 13 anew")


def test_a_changelog_without_rows_of_another_partition_is_seen_by_the_keys_the_last_eviction_removed(copy_fixture):
    """WM058 cannot see a changelog that holds no row; the window its own changelog removed is back in the load."""
    root = copy_fixture("agg_window_rocksdb")
    b_evicted_keys_loaded(root, fixture_facts("agg_window_rocksdb"))
    assert messages(root) == {"WM062": evicted_message("state/0/0", "12.zip, 13.changelog")}
    assert fixes(root, sink=True)["WM062"] == repair.RewindRequest(to_batch=11, file_sink=str(root / "output"))


def test_a_delta_replaced_by_the_version_before_is_seen_by_the_keys_the_last_eviction_removed(copy_fixture):
    root = copy_fixture("agg_window_hdfs")
    state_file_of("2/12.delta", "2/13.delta")(root)
    found = messages(root)
    assert found["WM062"] == evicted_message("state/0/2", "1.delta, …, 13.delta")
    assert sorted(found) == ["WM062", "WM078"]  # 12.delta's delete of a window 13.delta deleted already: WM078's too
    assert fixes(root)["WM062"] == fixes(root)["WM078"] == repair.RewindRequest(to_batch=11)


def test_keys_the_eviction_removed_are_judged_within_a_budget_of_bytes_read_whole(copy_fixture, monkeypatch):
    """WM062 reads the files of a partition whole only while AGED_BUDGET has room: past it a partition is not
    judged and a note says how many were left (a large state keeps check fast)."""
    from wmcheck.checkpoint.checks import state

    root = copy_fixture("agg_window_hdfs")
    state_file_of("2/12.delta", "2/13.delta")(root)
    sizes = {p.parent.name: sum(f.stat().st_size for f in p.parent.glob("*.delta"))
             for p in (root / "checkpoint/state/0").glob("*/13.delta")}
    monkeypatch.setattr(state, "AGED_BUDGET", sizes["0"] + sizes["1"])  # partitions 0 and 1 fit, not 2
    done = run_cli("check", str(root / "checkpoint"), "--format", "json", "--ignore", "WM078")  # sees the delta too
    assert "WM062" not in {f["code"] for f in json.loads(done.stdout)}
    assert (f"note: WM062 reads {sizes['0'] + sizes['1']:,} bytes of state files whole per check and left 1 store "
            "partition past them unjudged (their keys are not compared with the last batch's eviction watermark)\n"
            ) in done.stderr
    monkeypatch.setattr(state, "AGED_BUDGET", sum(sizes.values()))
    done = run_cli("check", str(root / "checkpoint"), "--format", "json", "--ignore", "WM078", exit_code=1)
    assert "WM062" in {f["code"] for f in json.loads(done.stdout)} and "note: WM062" not in done.stderr


@pytest.mark.parametrize("fixture, name", [("agg_window_hdfs", "14.snapshot"), ("agg_window_rocksdb", "14.zip")])
def test_a_later_full_copy_spark_cannot_read_is_skipped_not_read(copy_fixture, fixture, name):
    """A snapshot of a version the query has not reached that does not decode is skipped by the load that lists it
    (automatic snapshot repair; restart oracle: SILENT *-ahead-unreadable): a leftover (WM017), not stale state
    Spark reads (WM041), which the same file decoding is."""
    root = copy_fixture(fixture)
    target = root / "checkpoint/state/0/0" / name
    target.write_bytes(b"")
    assert "WM041" not in messages(root) and "WM017" in messages(root)
    shutil.copy2(root / "checkpoint/state/0/0" / ("1.delta" if name.endswith(".snapshot") else "12.zip"), target)
    assert "WM041" in messages(root)


@pytest.mark.parametrize("fixture, path, tail, drop, code", [
    ("agg_window_hdfs", "state/0/0/13.delta", bytes(21), 21, "WM039"),  # lz4: the end block zeroed
    ("state_types", "state/0/0/13.snapshot", b"\x00garbage", 0, "WM040"),  # zstd: bytes after the frame
    ("state_types_rocksdb", "state/0/0/13.changelog", b"\x00garbage", 0, "WM039"),  # snappy: after the last chunk
])
def test_bytes_past_a_state_files_end_marker_are_never_read(copy_fixture, fixture, path, tail, drop, code):
    """Spark's readers decompress as the record loop asks for bytes: the block, frame or chunk after the one holding
    the end marker is never read, damaged or not (restart oracle: SILENT state-*-after-its-end); the same bytes
    before the file's first one fail its load (a snapshot: skipped, WM040)."""
    root = copy_fixture(fixture)
    target = root / "checkpoint" / path
    data = target.read_bytes()
    hand_edit(target, data[:len(data) - drop] + tail)
    assert not {"WM039", "WM040"} & set(messages(root))
    hand_edit(target, tail + data)
    assert code in messages(root)


def test_keys_the_eviction_removed_are_not_judged_without_a_removal_in_the_operators_files(copy_fixture):
    """Complete output mode never removes a key: state older than the watermark is its normal state. Without a
    delete anywhere in the files the operator's next load reads, WM062 says nothing."""
    root = copy_fixture("agg_window_hdfs")
    state_file_of("2/12.delta", "2/13.delta")(root)
    for delta in (root / "checkpoint/state/0").glob("*/*.delta"):
        original = delta.read_bytes()
        rows = b"".join(struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value
                        for kind, key, value in sized_records(decompress(original, "lz4", delta.name), delta.name)
                        if kind != DELETE and value is not None)
        hand_edit(delta, _lz4_raw(rows + struct.pack(">i", -1), original))
    assert "WM062" not in messages(root)
    delta = "checkpoint/state/0/2/12.delta"
    shutil.copy2(FIXTURES / "agg_window_hdfs" / delta, root / delta)  # its removals again
    assert "WM062" in messages(root)


def test_keys_the_eviction_removed_are_not_judged_against_a_watermark_the_last_batch_did_not_run_with(copy_fixture):
    """The last batch's watermark raised as set-watermark raises it (offsets/12 and commits/12): every window is at
    or before it, but batch 12 evicted with the one commits/11 passed on; WM062 then says nothing."""
    root = copy_fixture("agg_window_rocksdb")
    set_watermark(root / "checkpoint", 12, offsets_ms=1_704_067_400_000, commit_ms=1_704_067_400_000)
    assert "WM062" not in messages(root)
    set_watermark(root / "checkpoint", 11, commit_ms=1_704_067_400_000)  # as if batch 12 had run with it
    assert "WM062" in messages(root)


def printed_plan(mode: str) -> QueryProgress:
    """An event log's plan of agg_window_rocksdb's batch 12 printing its aggregation in output mode ``mode``."""
    aggregation = PlanOperator(0, "StateStoreSave", 1_704_067_274_000, 1_704_067_285_000, PASSES, (), mode)
    root = PlanNode("operator", (PlanNode("watermark"),), aggregation)
    return QueryProgress("q", (), {}, {12: BatchPlan("q", "r", 12, None, None, root)})


def test_keys_the_eviction_removed_are_judged_in_append_mode_only_when_the_plan_prints_the_mode(copy_fixture):
    """Update mode removes such a key without output (harmless alone: not reported); complete mode keeps them all."""
    root = copy_fixture("agg_window_rocksdb")
    b_evicted_keys_loaded(root, fixture_facts("agg_window_rocksdb"))
    ckpt = open_checkpoint(str(root / "checkpoint"))
    found = {mode: {f.code for f in check_checkpoint(ckpt, progress=printed_plan(mode))}
             for mode in ("Append", "Update", "Complete")}
    assert found == {"Append": {"WM062"}, "Update": set(), "Complete": set()}


def test_a_schema_file_of_another_aggregation_is_named_with_the_rows_it_does_not_describe(copy_fixture):
    """WM059, and no WM058: keys hashed by another schema's columns would seem to be another partition's."""
    root = copy_fixture("agg_window_hdfs")
    b_schema_of_another_aggregation(root, fixture_facts("agg_window_hdfs"))
    assert messages(root) == {"WM059": (
        "the key rows of state/0/0/2.delta are not rows of the key schema in state/0/0/_metadata/schema (another "
        "number or kind of columns): the schema file comes from another query, or the state does; on restart Spark "
        "compares the file with the query's own state schema and fails where they differ "
        "(STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE; tested with a schema file of another aggregation). If the query "
        "that restarts wrote this state, its schema file is the one to replace")}
    assert fixes(root)["WM059"] == Instruction("while the query is stopped, delete state/0/0/_metadata/schema with its "
                                                "checksum file: Spark writes it again from the query when it starts")


def test_a_format_2_commit_without_unique_ids_names_the_partitions_and_the_rewind(copy_fixture):
    facts = fixture_facts("checkpoint_v2")
    last = facts["last_committed_batch"]
    root = copy_fixture("checkpoint_v2")
    b_commit_without_unique_ids(root, facts)
    assert messages(root) == {"WM060": (
        f"commits/{last}, the newest commit, names no state unique id for state/0/0, state/0/1 (operator 0): with "
        f"checkpoint format 2 Spark loads state version {last + 1} by the ids the newest commit names, and fails "
        "(CANNOT_LOAD_STATE_STORE; with some partitions named: an ArrayIndexOutOfBoundsException; tested); the "
        "commit was edited or written by a run without checkpoint format 2, and a rewind to before batch "
        f"{last} drops it, Spark re-running the batch from the ids the commit before names")}
    assert fixes(root)["WM060"] == repair.RewindRequest(to_batch=last - 1)


def test_a_schema_file_with_another_value_schema_is_named_by_its_value_rows(copy_fixture):
    """The sliding_window fixture's aggregation counts only: agg_window_hdfs's value rows (count, sum) do not fit it,
    though its deletes (no value) and keys do."""
    root = copy_fixture("agg_window_hdfs")
    path = "state/0/0/_metadata/schema"
    hand_edit(root / "checkpoint" / path, (FIXTURES / "sliding_window" / "checkpoint" / path).read_bytes())
    [(code, text)] = messages(root).items()
    assert code == "WM059" and text.startswith("the value rows of state/0/0/2.delta are not rows of the value schema in "
                                               "state/0/0/_metadata/schema"), text


def test_avro_encoded_state_rows_are_not_read_as_unsafe_rows(copy_fixture):
    """With spark.sql.streaming.stateStore.encodingFormat=avro the rows are Avro records: WM058 and WM059 do not
    judge them (every row would seem not to fit)."""
    facts = fixture_facts("agg_window_rocksdb")
    root = copy_fixture("agg_window_rocksdb")
    for batch in range(facts["last_batch"] + 1):
        edit_json(root / "checkpoint" / "offsets" / str(batch), 1,
                  lambda o: o["conf"].update({"spark.sql.streaming.stateStore.encodingFormat": "avro"}))
    assert not set(messages(root)) & {"WM058", "WM059"}
    edit_json(root / "checkpoint" / "offsets" / str(facts["last_batch"]), 1,
              lambda o: o["conf"].update({"spark.sql.streaming.stateStore.encodingFormat": "unsaferow"}))
    partition_files_of(1, 0)(root)
    assert "WM058" in messages(root)  # read again once the restart's encoding is unsaferow


def test_rows_of_one_file_that_do_not_fit_while_others_do_are_not_the_schema_files_fault():
    """WM059 needs every file with rows to misfit (a schema file of another query); one file alone is damage."""
    from wmcheck.checkpoint.checks.context import Context
    from wmcheck.checkpoint.checks.partitioning import misfit_schema
    from wmcheck.checkpoint.checks.state import content_loads
    from wmcheck.checkpoint.key_partitions import Sample

    ctx = Context(open_checkpoint(str(Path(__file__).resolve().parents[1] / "fixtures/agg_window_hdfs/checkpoint")))
    content_loads(ctx)
    found = ctx.memo["row-samples"]
    with_rows = sorted(p for p, sample in found.items() if sample.rows)
    found[with_rows[0]] = Sample(misfit="key", rows=1)
    assert list(misfit_schema.run(ctx)) == []
    found.update({p: Sample(misfit="key", rows=1) for p in with_rows})
    assert [issue.path for issue in misfit_schema.run(ctx)] == ["state/0/0/_metadata/schema"]


@pytest.mark.parametrize("offset", ["null", "{}", '{"logOffset":"9"}'])
def test_a_file_source_offset_spark_cannot_read_is_named_with_the_rewind(copy_fixture, offset):
    facts = fixture_facts("agg_window_hdfs")
    last = facts["last_batch"]
    root = copy_fixture("agg_window_hdfs")
    path = root / "checkpoint" / "offsets" / str(last)
    hand_edit(path, path.read_bytes().replace(b'{"logOffset":9}', offset.encode()))
    assert messages(root) == {"WM054": (
        f"source 0 (a file source) ends batch {last - 1} at file log batch 9 but batch {last} with {offset}, which Spark "
        f"cannot read as a file source's offset (a JSON object with a number as logOffset): offsets/{last} was edited "
        "or comes from another query. On restart Spark reads the source offsets of the last two offsets files and "
        "fails ('No usable value for logOffset'; for null a NullPointerException; tested with Spark 4.3); a rewind to "
        f"before batch {last} drops it and Spark plans the batch again")}
    assert fixes(root)["WM054"] == repair.RewindRequest(to_batch=last - 1)


def test_every_key_of_every_fixture_is_in_the_partition_spark_sends_it_to():
    """Spark's hash partitioning, as key_partitions computes it, on every state key of the fixtures' load chains:
    aggregations, deduplications, (flat)MapGroupsWithState and applyInPandasWithState, HDFS and RocksDB (changelogs
    and snapshots' table files), and every row fits its schema."""
    from wmcheck.checkpoint.checks.context import Context
    from wmcheck.checkpoint.checks.partitioning import foreign_partition_files, misfit_schema, samples

    checked = set()
    for path in sorted((Path(__file__).resolve().parents[1] / "fixtures").glob("*/checkpoint")):
        ctx = Context(open_checkpoint(str(path)))
        assert list(foreign_partition_files.run(ctx)) == list(misfit_schema.run(ctx)) == [], path
        names = {op.operator_id: op.name for op in ctx.operators}
        checked |= {(names[int(p.split("/")[1])], p.rsplit(".", 1)[-1]) for p in samples(ctx)}
    assert checked >= {("stateStoreSave", "delta"), ("stateStoreSave", "changelog"), ("stateStoreSave", "sst"),
                       ("dedupe", "delta"), ("dedupe", "sst"), ("flatMapGroupsWithState", "delta"),
                       ("applyInPandasWithState", "delta")}, checked


def test_row_checksums_turned_on_in_the_last_offsets_file_are_a_conf_change(copy_fixture):
    """Spark then expects a checksum before every row of state written without (it fails to load it): WM015, and
    the rows are not judged against their schema or partition (which way they were written is unknown)."""
    facts = fixture_facts("agg_window_hdfs")
    root = copy_fixture("agg_window_hdfs")
    edit_json(root / "checkpoint" / "offsets" / str(facts["last_batch"]), 1,
              lambda o: o["conf"].update({"spark.sql.streaming.stateStore.rowChecksum.enabled": "true"}))
    found = check_checkpoint(open_checkpoint(str(root / "checkpoint")))
    assert sorted((f.code, f.path) for f in found if f.code in ("WM015", "WM058", "WM059")) == [
        ("WM015", f"offsets/{facts['last_batch']}")]
    assert fixes(root)["WM015"] == repair.RewindRequest(to_batch=facts["last_batch"] - 1)


def test_confs_spark35_does_not_restore_say_what_each_spark_does(copy_fixture, tmp_path):
    """Spark 3.5 sets only the confs it knows from the last offsets file: row checksums turned on there, or an
    encoding format Spark 4.3 refuses, fail a Spark 4 restart (WM015, WM057; WM039 for each file whose rows have no
    checksums) and not a Spark 3.5 one, and the messages say so for a checkpoint whose state Spark 3.5 wrote
    (tests/test_spark35.py restarts both)."""
    last = fixture_facts("agg_spark35")["last_batch"]
    checksums = copy_fixture("agg_spark35")
    encoding = tmp_path / "encoding"
    shutil.copytree(checksums, encoding)
    edit_json(checksums / "checkpoint" / "offsets" / str(last), 1,
              lambda o: o["conf"].update({"spark.sql.streaming.stateStore.rowChecksum.enabled": "true"}))
    assert messages(checksums)["WM015"] == (
        f"spark.sql.streaming.stateStore.rowChecksum.enabled is 'true' at batch {last} but 'false' from batch 0: Spark "
        f"pins it for the life of a query and restarts with the value of the last offsets file, offsets/{last}, so "
        "state written under one value is read under the other (a failed or wrong restart; Spark 3.5 does not restore "
        "it (Spark 4 does) and restarts correctly, its state written as Spark 3.5 writes it); the logs come from two "
        "runs or were edited (wmcheck undo restores them if a repair did it), and a rewind to before batch "
        f"{last} drops them")
    unverified = [f.message for f in check_checkpoint(open_checkpoint(str(checksums / "checkpoint"))) if f.code == "WM039"]
    assert len(unverified) == 3 and all(m.startswith("row checksum verification failed") and (
        "reading this file (CANNOT_LOAD_STATE_STORE) (Spark 4 verifies row checksums; Spark 3.5 does not restore "
        "spark.sql.streaming.stateStore.rowChecksum.enabled and reads the rows as they were written, without: it "
        "restarts correctly); ") in m for m in unverified), unverified
    edit_json(encoding / "checkpoint" / "offsets" / str(last), 1,
              lambda o: o["conf"].update({"spark.sql.streaming.stateStore.encodingFormat": "json"}))
    assert messages(encoding) == {"WM057": (
        f"offsets/{last}, the offsets file Spark restarts from, pins spark.sql.streaming.stateStore.encodingFormat = "
        "'json', which Spark 4.3 refuses (Spark accepts 'unsaferow' or 'avro'): it sets every pinned conf from that "
        "file on restart and fails at once ([INVALID_CONF_VALUE], whether or not an operator uses the conf); Spark 3.5 "
        "neither restores nor checks this conf (Spark 4 does) and restarts regardless; batch "
        f"{last - 1} pinned no value (Spark's default then): the offsets files from batch {last} on come from another "
        f"run or were edited, and a rewind to before batch {last} drops them")}
    assert fixes(encoding)["WM057"] == repair.RewindRequest(to_batch=last - 1)


def test_an_extra_partition_directory_without_operator_metadata_keeps_the_pinned_count(copy_fixture):
    """Spark 3.5 writes no operator metadata: the operator has the pinned partition count (3), so a copy of
    state/0/2 as state/0/3 is WM019's extra directory, and no key is judged against 4 partitions (WM058)."""
    root = copy_fixture("agg_spark35")
    shutil.copytree(root / "checkpoint" / "state" / "0" / "2", root / "checkpoint" / "state" / "0" / "3")
    assert [op.num_partitions for op in open_checkpoint(str(root / "checkpoint")).operators] == [3]
    assert messages(root) == {"WM019": (
        "operator 0 has 3 partitions (spark.sql.shuffle.partitions=3) but state also holds partition 1 directory "
        "beyond it (state/0/3): written by a run with more shuffle partitions, copied in, or the metadata was edited; "
        "Spark does not read them at 3 partitions, but nothing here proves they are unneeded (an older layout or a "
        "rewind may need them)")}


def test_a_refused_partition_count_is_not_also_one_spark_overrides(copy_fixture):
    """Spark fails on a refused spark.sql.shuffle.partitions before it runs any operator: WM057, not WM045's
    'Spark runs the operator with that many partitions, so the restart works'."""
    facts = fixture_facts("agg_window_hdfs")
    root = copy_fixture("agg_window_hdfs")
    for batch in range(facts["last_batch"] + 1):
        edit_json(root / "checkpoint" / "offsets" / str(batch), 1,
                  lambda o: o["conf"].update({"spark.sql.shuffle.partitions": "0"}))
    assert set(messages(root)) == {"WM057"}


@pytest.mark.parametrize(("key", "value", "refused"), [
    ("spark.sql.shuffle.partitions", "0", "Spark accepts a positive number"),
    ("spark.sql.shuffle.partitions", "three", "it is not an integer"),
    ("spark.sql.streaming.multipleWatermarkPolicy", "foo", "Spark accepts 'min' or 'max'"),
    ("spark.sql.streaming.multipleWatermarkPolicy", "MAX", None),
    ("spark.sql.streaming.aggregation.stateFormatVersion", "3", "Spark accepts versions 1 and 2"),
    ("spark.sql.streaming.join.stateFormatVersion", "4", None),
    ("spark.sql.streaming.stateStore.rocksdb.formatVersion", "-1", "Spark accepts a number not negative"),
    ("spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion", "3", "Spark accepts versions 1 and 2"),
    ("spark.sql.streaming.stateStore.encodingFormat", "AVRO", None),
    ("spark.sql.streaming.stateStore.encodingFormat", "json", "Spark accepts 'unsaferow' or 'avro'"),
    ("spark.sql.streaming.stateStore.rowChecksum.enabled", "yes", "it is not true or false"),
    ("spark.sql.streaming.stateStore.rowChecksum.enabled", "TRUE", None),
    ("spark.sql.streaming.stateStore.compression.codec", "foo",
     "no codec has that name; Spark knows lz4, lzf, snappy, zstd or a class name"),
    ("spark.sql.streaming.stateStore.compression.codec", "ZSTD", None),
    ("spark.sql.streaming.stateStore.compression.codec", "com.example.Codec", None),
    ("spark.sql.streaming.stateStore.providerClass", "org.apache.spark.sql.execution.streaming.state.NoSuchProvider",
     "Apache Spark has no such class"),
    ("spark.sql.streaming.stateStore.providerClass", "com.example.MyProvider", None),  # may be on the class path
    ("spark.sql.streaming.unknown", "x", None),  # a conf Spark does not restore
    ("spark.sql.streaming.aggregation.stateFormatVersion", None, "a restored conf needs a value"),
    ("spark.sql.streaming.stateStore.compression.codec", None, "a restored conf needs a value"),
    ("spark.sql.streaming.unknown", None, None),  # setSessionConf reads only the confs it restores
])
def test_which_pinned_values_spark_refuses(key, value, refused):
    """As Spark 4.3's setConfString (and its store, for the provider and the codec) takes each pinned value."""
    from wmcheck.checkpoint.conf_values import refusal

    found = refusal(key, {key: value}, stateful=True)
    assert (found and found.reason) == refused
    assert refusal(key, {}, stateful=True) is None  # not pinned: Spark's default


def test_a_stateless_query_restarts_with_any_codec_or_provider():
    from wmcheck.checkpoint.conf_values import refusal

    codec, agg = "spark.sql.streaming.stateStore.compression.codec", "spark.sql.streaming.aggregation.stateFormatVersion"
    assert refusal(codec, {codec: "foo"}, stateful=False) is None
    assert refusal(agg, {agg: "3"}, stateful=False) is not None
    assert refusal(codec, {codec: None}, stateful=False) is not None  # setConfString refuses a null at once


def test_sink_ahead_and_behind_name_the_batches(copy_fixture, tmp_path):
    facts = fixture_facts("agg_window_hdfs")
    last = facts["last_committed_batch"]
    ahead = copy_fixture("agg_window_hdfs")
    b_sink_ahead(ahead, facts)
    text = messages(ahead, sink=True)["WM024"]
    assert f"committed batch {last + 1} but the checkpoint's last committed batch is {last}" in text
    assert fixes(ahead, sink=True)["WM024"] == repair.RewindRequest(to_batch=last, file_sink=str(ahead / "output"))
    behind = tmp_path / "behind"
    shutil.copytree(ahead, behind)
    drop(behind / "output" / "_spark_metadata" / str(last + 1))
    b_sink_behind(behind, facts)
    assert f"committed batch {last} but the file sink's log ends at batch {last - 1}" in messages(behind, sink=True)["WM025"]


def test_decreasing_watermark_after_set_watermark_is_only_that_warning(copy_fixture):
    """Lowering the last batch's watermark as wmcheck set-watermark does (offsets/L and commits/L) gives WM011 only."""
    facts = fixture_facts("agg_window_hdfs")
    root = copy_fixture("agg_window_hdfs")
    last = facts["last_batch"]
    set_watermark(root / "checkpoint", last, offsets_ms=1000, commit_ms=1000)
    assert set(messages(root)) == {"WM011"}


def test_sink_file_checks_share_one_listing_of_the_sink(copy_fixture):
    """WM032, WM033, WM034 and WM047 find the sink's data files in one recursive listing of the sink directory, not
    one look-up per file the log names (each a round trip on an object store): no data file is looked up on its own,
    and a file that is gone is still found missing (one look-up, its own)."""
    from wmcheck.checkpoint.fs import open_fs

    root = copy_fixture("agg_window_hdfs")
    sink_at_home(root, "agg_window_hdfs")
    gone = data_files_of(root, 11)[0]
    gone.unlink()
    sink = open_fs(str(root / "output"))
    looked_up: list[str] = []
    walked: list[str] = []
    info, walk = sink.info, sink.walk
    sink.info = lambda path: looked_up.append(path) or info(path)  # type: ignore[method-assign]
    sink.walk = lambda path: walked.append(path) or walk(path)  # type: ignore[method-assign]
    codes = ("WM032", "WM033", "WM034", "WM047")
    found = check_checkpoint(open_checkpoint(str(root / "checkpoint")), sink, checks=[CHECKS[c] for c in codes])
    assert [(f.code, f.path) for f in found] == [("WM047", "../output/_spark_metadata")]
    assert walked == [""]
    assert [p for p in looked_up if not p.startswith("_spark_metadata")] == [gone.name]
    assert len(data_files_of(root, 10)) + len(data_files_of(root, 12)) > 0  # the others were found by the listing


def test_bare_logged_paths_of_a_whole_log_file_are_listed_once_and_counted(copy_fixture):
    """Every entry of sources/0/9.compact a bare path (more than one directory listing's worth), one of their files
    gone: the others are input read again."""
    root = copy_fixture("agg_window_hdfs")
    sink_at_home(root, "agg_window_hdfs")
    log = root / "checkpoint/sources/0/9.compact"
    bare = []
    for line in range(1, 11):
        edit_json(log, line, lambda e: bare.append(e.update(path=e["path"].replace("file://", "")) or e["path"]))
    Path(bare[0]).unlink()
    assert len(bare) == 10 > LISTED_FROM
    assert messages(root) == {"WM064": (
        f"sources/0: 9 logged paths without a scheme (e.g. {bare[1]}; Spark logs and lists file: URIs). {SEEN_AGAIN}")}


def test_present_files_asks_the_checkpoint_store_for_bare_paths_and_the_local_disk_for_file_uris(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text("{}")
    a, b = tmp_path / "in" / "a.json", tmp_path / "in" / "b.json"
    asked = [str(a), str(b), f"file://{a}", f"file:{b}", "relative/a.json", "s3://bucket/in/a.json", f"file://host{a}"]
    assert present_files(open_fs(str(tmp_path / "ckpt")), asked) == {
        str(a): True, str(b): False, f"file://{a}": True, f"file:{b}": False}


@pytest.mark.parametrize("fixture,partition,names", [
    ("agg_window_rocksdb", "state/0/0", ["backup.changelog", "013.changelog", ".12.zip.crc", "12.zip.bak", "013.zip", "011.zip"]),
    ("agg_window_hdfs", "state/0/1", ["old.delta", "1.2.delta", "old.zip", "13.snapshot.bak", "015.snapshot", "00.snapshot"])])
def test_state_files_named_by_hand_that_spark_does_not_list_as_snapshots_are_no_wm070(copy_fixture, fixture, partition, names):
    """Spark lists as snapshots only names ending in its provider's snapshot suffix (WM070), and reads a version's file
    by the name it gives it: RocksDB's loader falls back from a snapshot listed under another name (013.zip), and one
    after the version loaded is not listed for it (015.snapshot)."""
    root = copy_fixture(fixture)
    source = next(p for p in (root / "checkpoint" / partition).iterdir() if p.is_file())
    for name in names:
        shutil.copyfile(source, root / "checkpoint" / partition / name)
    assert run_cli("check", root / "checkpoint", "--select", "WM070").output.endswith(": ok: 0 error(s), 0 warning(s) from 1 checks\n")
    # nor a state file of the version its name reads as: Spark reads a version's file by the name it gives it
    # (tests/oracle_cases.py: RocksDB's 013.zip restarts as the control run does; a WM040 warning, Spark 3.5 fails)
    assert all(f["severity"] != "error" for f in json.loads(run_cli("check", root / "checkpoint", "--format", "json").stdout))


def test_a_partition_count_edited_in_the_offsets_is_no_repartition(copy_fixture):
    """A no-data batch that only changed the pinned partition count looks like Spark's repartition in its offsets,
    but its state is an ordinary batch's deltas in the old partitions: WM015 with the rewind to before it, not
    partitions holding another's keys (WM058) or extra (WM019), nor edited operator metadata (WM045). Every
    offsets file edited: WM074, with the count the operator metadata and the partitions holding the loaded version
    agree on."""
    facts = fixture_facts("agg_window_hdfs")
    last = facts["last_batch"]
    root = copy_fixture("agg_window_hdfs")
    b_partitions_last(root, facts)
    assert sorted(messages(root)) == ["WM015"]
    assert messages(root)["WM015"] == (
        "spark.sql.shuffle.partitions is '2' at batch 12 but '3' from batch 0: Spark pins it for the life of a query "
        "and restarts with the value of the last offsets file, offsets/12, so state written under one value is read "
        "under the other (a failed or wrong restart); the logs come from two runs or were edited (wmcheck undo "
        "restores them if a repair did it), and a rewind to before batch 12 drops them")
    assert fixes(root)["WM015"] == repair.RewindRequest(to_batch=last - 1)


@pytest.mark.parametrize("count, outcome", [
    ("2", "Spark loads partitions 0..1 only and hashes each key to another partition than the one holding its state: "
          "rows are lost or emitted twice (tested: the restart's output differs from a control run)"),
    ("5", "partitions 3..4 hold no state, and loading version 13 there fails (tested: "
          "[CANNOT_LOAD_STATE_STORE.CANNOT_READ_DELTA_FILE_NOT_EXISTS])")])
def test_a_partition_count_edited_in_every_offsets_file_is_not_the_states(copy_fixture, count, outcome):
    last = fixture_facts("agg_window_hdfs")["last_batch"]
    root = copy_fixture("agg_window_hdfs")
    for batch in range(last + 1):
        edit_json(root / "checkpoint" / "offsets" / str(batch), 1,
                  lambda o: o["conf"].update({"spark.sql.shuffle.partitions": count}))
    assert messages(root) == {"WM074": (
        f"every offsets file pins spark.sql.shuffle.partitions={count}, which Spark restarts with, but state version "
        f"13 of operator 0 was written in 3 partitions (the operator metadata says 3, and state/0/0..2 hold that "
        f"version): {outcome}; the offsets files were edited or come from another query")}
    assert fixes(root)["WM074"] == Instruction(
        'set spark.sql.shuffle.partitions to "3" in every offsets file (offsets/12 decides the restart, an older '
        'file a rewind to its batch), or restore them from a backup')


HDFS_CLASS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB_CLASS = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


@pytest.mark.parametrize("fixture, key, value, evidence, outcome, written", [
    ("agg_window_hdfs", "spark.sql.streaming.stateStore.providerClass", ROCKSDB_CLASS,
     "the state holds HDFS-backed state files (deltas, snapshots) only",
     "Spark opens every store with the pinned provider, which finds none of its own files there, and loading the "
     "state fails (tested: [CANNOT_LOAD_STATE_STORE.CANNOT_READ_STREAMING_STATE_FILE] … 1.changelog does not exist)",
     HDFS_CLASS),
    ("agg_window_rocksdb", "spark.sql.streaming.stateStore.providerClass", HDFS_CLASS,
     "the state holds RocksDB state files (zips, changelogs) only",
     "Spark opens every store with the pinned provider, which finds none of its own files there, and loading the "
     "state fails (tested: [CANNOT_LOAD_STATE_STORE.CANNOT_READ_DELTA_FILE_NOT_EXISTS] … 1.delta)", ROCKSDB_CLASS),
    ("agg_window_hdfs", "spark.sql.streaming.aggregation.stateFormatVersion", "1",
     "the value schema of operator 0's state (count, sum) is format 2's (the aggregation buffer alone)",
     "on restart Spark compares the state's schema with the one the pinned format makes and fails (tested: "
     "[STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE])", "2")])
def test_a_conf_edited_in_every_offsets_file_is_not_the_states(copy_fixture, fixture, key, value, evidence, outcome,
                                                                written):
    """The provider (the kind of state files says which) and the aggregation state format (the aggregation's value
    schema says which) pinned in every offsets file where the state was written with another."""
    last = fixture_facts(fixture)["last_batch"]
    root = copy_fixture(fixture)
    for batch in range(last + 1):
        edit_json(root / "checkpoint" / "offsets" / str(batch), 1, lambda o: o["conf"].update({key: value}))
    assert messages(root) == {"WM074": (
        f"every offsets file pins {key}={value}, which Spark restarts with, but {evidence}: {outcome}; the offsets "
        f"files were edited or come from another query")}
    assert fixes(root)["WM074"] == Instruction(
        f'set {key} to "{written}" in every offsets file (offsets/{last} decides the restart, an older file a rewind '
        f'to its batch), or restore them from a backup')


def test_a_gap_in_the_offsets_spark_does_not_read_is_a_warning(copy_fixture):
    """offsets/1..10 deleted (their commits kept): Spark reads offsets/12 and 11 on restart (the restart oracle:
    the control run's output), so WM075, not WM002's error, and no WM004 for the commits left."""
    root = copy_fixture("agg_window_hdfs")
    for batch in range(1, 11):
        (root / "checkpoint" / "offsets" / str(batch)).unlink()
        (root / "checkpoint" / "offsets" / f".{batch}.crc").unlink()
    assert messages(root) == {"WM075": (
        "offsets/1..10 missing between batches 0 and 11 (commits/1..10 kept): on restart Spark reads only offsets/12 "
        "and offsets/11, so the restart is not affected (tested with Spark 4.3: the control run's output), but no "
        "rewind to batch 1..11 can be made (Spark would read the missing files), and tools reading the whole log "
        "(wmcheck batches, replay) skip those batches")}
    assert fixes(root)["WM075"] == Instruction(
        "nothing to change for a restart; restore the files from a backup before rewinding to those batches")


def test_a_repartition_spark_wrote_is_still_one(copy_fixture):
    """Spark's own repartition (3 to 5 partitions at batch 9: fresh snapshots of version 10 in the five) stays a
    repartition: no conf change, no partition finding."""
    assert messages(copy_fixture("repartition_rocksdb")) == {}
