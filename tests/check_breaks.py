"""The breaking cases of ``wmcheck check``: per check, a real fixture broken the way people and crashes break it
(tests/test_check.py runs each in every format and executes its fix)."""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.checks.definition import Fix
from wmcheck.checkpoint.model import open_checkpoint, store_unique_ids
from wmcheck.checkpoint.validate import check_checkpoint

from conftest import fixture_facts, names_own_schemas, sink_at_home
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
LAST_BATCH_MS = 1795386142052
"""agg_window_hdfs: offsets/12's batchTimestampMs."""


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


def messages(root: Path, sink: bool = False) -> dict[str, str]:
    findings = check_checkpoint(open_checkpoint(str(root / "checkpoint")), str(root / "output") if sink else None)
    return {f.code: f.message for f in findings}


def fixes(root: Path, sink: bool = False) -> dict[str, Fix]:
    findings = check_checkpoint(open_checkpoint(str(root / "checkpoint")), str(root / "output") if sink else None)
    return {f.code: f.fix for f in findings}


def broken_copy(copy_fixture, key: str) -> tuple[Path, dict]:
    """A copy of a case's fixture broken by BREAKS[key] (its logs naming the copy when the case checks the sink)."""
    case = BREAKS[key]
    root = copy_fixture(case.fixture)
    if case.sink:
        sink_at_home(root, case.fixture)
    facts = fixture_facts(case.fixture)
    case.apply(root, facts)
    return root, facts


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
