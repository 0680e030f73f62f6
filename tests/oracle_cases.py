"""How each check code's breakage is made on a restartable fixture copy, and how its fix is applied.

A case breaks a copy (``root``: ``checkpoint/``, ``input/``, ``output/``), names the code ``wmcheck check``
must report, and what Spark does on restart: ``FAILS`` (with a pattern of its error), ``WRONG`` (it restarts
but the sink's output differs from the same query restarted from the unbroken copy) or ``OK``. The finding's
fix is applied to another broken copy, after which the restart must give the reference output: ``repair``
runs the wmcheck command the fix is (its request, as check prints it), ``fix`` carries out a fix that is an
instruction (restore a file from the copy made before breaking it). ``remedy`` is what an instruction advises
for a live condition rather than a broken checkpoint (new data), checked by its own test. ``SPARK35`` says what
pyspark 3.5 does with the cases applied to the twin of their fixture that pyspark 3.5 wrote (``TWINS35``).
"""
from __future__ import annotations

import base64
import json
import os
import pickle
import re
import shlex
import shutil
import struct
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable
from urllib.parse import unquote, urlparse

from wmcheck.checkpoint.checks.definition import Fix, Instruction
from wmcheck.cli.fixes import fix_text

from conftest import run_cli
from restart_oracle import FIXTURES, Outcome, add_input, prepare, read_only, restart_all

FAILS, WRONG, OK = "fails", "wrong", "ok"  # restart_oracle.observed's words
AGG, COMPACTION, V2, TWS, STALL = "agg_window_hdfs", "compaction", "checkpoint_v2", "tws_pandas", "union_stall_min"
ROCKS = "agg_window_rocksdb"
TTL = "tws_ttl"  # its last batch, 6, reads an input file (log batch 6) and writes rows
NO_WATERMARK = "fmgws_tws_agg"  # applyInPandasWithState -> transformWithState -> aggregation
AGG35 = "agg_spark35"
ROCKS35, COMPACTION35, STALL35 = "agg_window_rocksdb_spark35", "compaction_spark35", "union_stall_min_spark35"
TWINS35 = {AGG: AGG35, ROCKS: ROCKS35, COMPACTION: COMPACTION35, STALL: STALL35,
           "join_stream_stream": "join_stream_stream_spark35", "pandas_state_p3": "pandas_state_p3_spark35"}
"""The fixture pyspark 3.5 wrote with a fixture's query, data and conf: where a case's Spark 3.5 restart happens."""
HELD_AT = "2024-01-01T00:00:08.000Z"  # union_stall_min's (and its twin's) watermark since batch 5


@dataclass(frozen=True)
class Case:
    key: str
    code: str
    fixture: str
    breaks: Callable[[Path], None]
    spark: str  # FAILS, WRONG or OK
    error: str = ""  # a pattern of Spark's error (FAILS)
    repair: bool = False  # run the finding's fix, a wmcheck command, and restart
    fix: Callable[[Path], None] | None = None  # carry out the finding's instruction, and restart
    then: Callable[[Path], None] | None = None  # after the fix, before the restart
    sink: bool = True  # check with --file-sink
    extra_batches: int = 1
    remedy: Callable[[Path], None] | None = None
    rounds: int = 1  # restarts in a row, one more input file each (a later load reads the state from its files)
    read_only: tuple[str, ...] = ()  # directories mounted read-only for check and Spark (the fixed copy: writable)

    @property
    def fixed(self) -> bool:
        return self.repair or self.fix is not None


@dataclass(frozen=True)
class Spark35:
    """What pyspark 3.5 does on restart of a case applied to its fixture's twin (``TWINS35``); ``fix``: also restart
    the fixed copy; ``code``: the code check reports there when not the case's (a Spark 3.5 checkpoint shows less).
    A case whose fixture has no twin (a query Spark 3.5 cannot run) names a 3.5 fixture that shows the same damage
    (``fixture``) and how it is made there (``breaks``); ``breaks`` alone makes the damage on the twin where the case's
    would change an entry the twin lacks; ``fixed_by``: how the finding's instruction is carried out
    where the case's fix is not what Spark 3.5 needs (the 4.3 restart needs none)."""

    spark: str
    error: str = ""
    fix: bool = False
    code: str = ""
    fixture: str = ""
    breaks: Callable[[Path], None] | None = None
    fixed_by: Callable[[Path], None] | None = None  # the instruction carried out, where Spark 3.5 needs another one


CHECK_DOCS = Path(__file__).resolve().parents[1] / "docs" / "check.md"
FIX_LINE = re.compile(r"`(wmcheck (?:rewind|set-watermark|relocate|repartition|undo) CKPT[^`]*)`")


def table_rows() -> list[list[str]]:
    """docs/check.md's table of what Spark does, a list of cells per code."""
    table = CHECK_DOCS.read_text().split("## What Spark does, code by code", 1)[1].split("\n## ", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("| WM")]


def documented() -> dict[str, tuple[str, str, str]]:
    """docs/check.md's table of what Spark does: code -> (severity, Spark 4.3 on restart, Spark 3.5 on restart)."""
    return {r[0]: (r[1], r[2], r[3]) for r in table_rows()}


def documented_fixes() -> dict[str, str]:
    """docs/check.md's table: code -> its tested fix."""
    return {r[0]: r[4] for r in table_rows()}


def docs_fix_lines() -> set[str]:
    """Every wmcheck command line docs/check.md gives as a fix (``CKPT`` and ``SINK`` for the checkpoint and the
    sink), wherever it is, lines joined."""
    return set(FIX_LINE.findall(re.sub(r"\s*\n\s*", " ", CHECK_DOCS.read_text())))


def placeholder_line(fix: Fix) -> str:
    """A fix's command line as docs/check.md writes it: ``CKPT``, ``SINK``, a path map's directories as OLD=NEW."""
    return re.sub(r"--path-map \S+", "--path-map OLD=NEW", fix_text(fix, "CKPT", "SINK"))


def unlink(root: Path, *paths: str) -> None:
    for p in paths:
        (root / p).unlink()


def hadoop_crc(path: str) -> str:
    folder, _, name = path.rpartition("/")
    return f"{folder}/.{name}.crc"


def line_ends_in(path: str, suffix: bytes, index: int = -1) -> Callable[[Path], None]:
    """Append ``suffix`` to line ``index`` of a file (the last line that is not empty by default), as an edit by hand."""
    def go(root: Path) -> None:
        target = root / path
        lines = target.read_bytes().split(b"\n")
        at = index if index >= 0 else max(i for i, line in enumerate(lines) if line.strip())
        lines[at] += suffix
        target.write_bytes(b"\n".join(lines))
    return go


def first_line_is(path: str, line: bytes) -> Callable[[Path], None]:
    """Replace a file's first line (a log file's version header), as an edit by hand."""
    def go(root: Path) -> None:
        target = root / path
        target.write_bytes(line + target.read_bytes()[target.read_bytes().index(b"\n"):])
    return go


def line_ends_are(*paths: str, end: bytes) -> Callable[[Path], None]:
    """Write files with ``end`` ending their lines instead of ``\\n`` (an editor's line ends), as an edit by hand."""
    def go(root: Path) -> None:
        for path in paths:
            target = root / path
            target.write_bytes(target.read_bytes().replace(b"\n", end))
    return go


def hand_json(path: Path, change: Callable[[str], str]) -> None:
    """Rewrite a JSON file's text by hand (its sidecar left stale); the change must change it."""
    text = path.read_text()
    assert change(text) != text, path
    path.write_text(change(text))


def zip_metadata_edited(path: Path, change: Callable[[str], str]) -> None:
    """Rewrite the ``metadata`` entry of a RocksDB snapshot zip by hand, removing the zip's Hadoop sidecar."""
    with zipfile.ZipFile(path) as z:
        entries = [(info, z.read(info.filename)) for info in z.infolist()]
    with zipfile.ZipFile(path, "w") as z:
        for info, data in entries:
            if info.filename == "metadata":
                text = data.decode()
                assert change(text) != text, path
                data = change(text).encode()
            z.writestr(info, data)
    (path.parent / f".{path.name}.crc").unlink()


def schema_json_edited(path: Path, key: Callable[[str], str] = str, value: Callable[[str], str] = str) -> None:
    """Rewrite the key and value schema JSON of a v2 state schema file (``state/<op>/<p>/_metadata/schema``: the
    version and each schema as Java's ``writeUTF``, each schema in counted chunks) by hand, its sidecar left stale."""
    data, at = path.read_bytes(), 0

    def utf(text: str) -> bytes:
        raw = text.encode()
        return struct.pack(">H", len(raw)) + raw

    def take_utf() -> str:
        nonlocal at
        (n,) = struct.unpack_from(">H", data, at)
        at += 2 + n
        return data[at - n:at].decode()

    version = take_utf()
    schemas = []
    for _ in range(2):
        (chunks,) = struct.unpack_from(">i", data, at)
        at += 4
        schemas.append("".join(take_utf() for _ in range(chunks)))
    assert at == len(data), path
    path.write_bytes(utf(version) + b"".join(struct.pack(">i", 1) + utf(change(text))
                                             for change, text in zip((key, value), schemas)))


def edit(root: Path, path: str, old: str, new: str) -> None:
    """Replace text in a file, leaving its checksum sidecar as it was (a hand edit)."""
    target = root / path
    text = target.read_text()
    assert old in text, (path, old)
    target.write_text(text.replace(old, new))


def finding_fix(findings: list, code: str) -> Fix | None:
    """The fix of the first finding of ``code``."""
    return next((f.fix for f in findings if f.code == code), None)


def run_printed(fix: Fix, checkpoint: str) -> None:
    """Run a fix as check prints it, with ``--execute`` (undo has none) and no idle wait."""
    words = shlex.split(fix_text(fix, checkpoint))
    assert words[0] == "wmcheck", words
    run_cli(*words[1:], *([] if words[1] == "undo" else ["--execute"]), "--idle", "0")


def backup(root: Path) -> Path:
    """Where the harness keeps the copy as it was before the case broke it."""
    return root.parent / f"{root.name}.backup"


def stamp(root: Path, batch: int) -> int:
    """The ``batchTimestampMs`` of a copy's ``offsets/<batch>``."""
    return json.loads((root / C / "offsets" / str(batch)).read_text().split("\n")[1])["batchTimestampMs"]


def swapped_dirs(a: str, b: str) -> Callable[[Path], None]:
    """Swap two directories (a mix-up, and the fix that puts them back)."""

    def run(root: Path) -> None:
        (root / a).rename(root / f"{a}.tmp")
        (root / b).rename(root / a)
        (root / f"{a}.tmp").rename(root / b)

    return run


def restore(*paths: str) -> Callable[[Path], None]:
    """Put files and directories back as they were in the copy made before breaking (what 'restore it from a
    backup' does)."""

    def run(root: Path) -> None:
        pristine = backup(root)
        for p in paths:
            (root / p).parent.mkdir(parents=True, exist_ok=True)
            if (pristine / p).is_dir():
                shutil.rmtree(root / p, ignore_errors=True)
                shutil.copytree(pristine / p, root / p)
            else:
                shutil.copy2(pristine / p, root / p)

    return run


def both(*fns: Callable[[Path], None]) -> Callable[[Path], None]:
    def run(root: Path) -> None:
        for fn in fns:
            fn(root)

    return run


def batch_timestamp_ms(root: Path, batch: int) -> int:
    return json.loads((root / "checkpoint" / "offsets" / str(batch)).read_text().split("\n")[1])["batchTimestampMs"]


def query_id(root: Path) -> str:
    return json.loads((root / "checkpoint" / "metadata").read_text())["id"]


def set_watermark(root: Path, batch: int, ms: int) -> None:
    """Set offsets/N.batchWatermarkMs and commits/N.nextBatchWatermarkMs (leaving sidecars stale)."""
    for log, key in (("offsets", "batchWatermarkMs"), ("commits", "nextBatchWatermarkMs")):
        path = root / "checkpoint" / log / str(batch)
        lines = path.read_text().split("\n")
        meta = json.loads(lines[1])
        meta[key] = ms
        lines[1] = json.dumps(meta, separators=(",", ":"))
        path.write_text("\n".join(lines))


C = "checkpoint"
SINK_LOG_12 = "output/_spark_metadata/12"
SOURCE_COMPACT = "sources/0/9.compact"
AGG_SCHEMA = "state/0/0/_metadata/schema"
TWS_SCHEMA = "state/0/_stateSchema/default/0_ca8ba419-8489-44a9-a404-06186defde9d"
TTL_SCHEMA = "state/0/_stateSchema/default/0_d6d43710-37b5-4627-86c7-f6130c07e874"


STRICT = "spark.sql.streaming.statefulOperator.useStrictDistribution"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
OPERATOR_FILES = tuple(f"{C}/state/0/{p}" for p in ("_metadata/metadata", "_metadata/.metadata.crc", "0/_metadata/schema",
                                                    "0/_metadata/.schema.crc"))
"""Operator 0's metadata and state schema, with their sidecars: Spark writes them again when they are missing."""


def edit_line(root: Path, path: str, line: int, text: str) -> None:
    """Replace line ``line`` (0-based) of a checkpoint file, leaving its checksum sidecar as it was."""
    target = root / C / path
    lines = target.read_text().split("\n")
    lines[line] = text
    target.write_text("\n".join(lines))


def edit_conf(root: Path, batch: int, change: Callable[[dict], object]) -> None:
    """Change the pinned conf of ``offsets/<batch>`` by hand (its sidecar left stale)."""
    meta = json.loads((root / C / "offsets" / str(batch)).read_text().split("\n")[1])
    change(meta["conf"])
    edit_line(root, f"offsets/{batch}", 1, json.dumps(meta, separators=(",", ":")))


AGG_FORMAT, PROVIDER = "spark.sql.streaming.aggregation.stateFormatVersion", "spark.sql.streaming.stateStore.providerClass"
JOIN_FORMAT = "spark.sql.streaming.join.stateFormatVersion"
GROUP_STATE_FORMAT = "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion"
ENCODING = "spark.sql.streaming.stateStore.encodingFormat"
SOURCE_EVOLUTION = "spark.sql.streaming.queryEvolution.enableSourceEvolution"
CHECKPOINT_FORMAT = "spark.sql.streaming.stateStore.checkpointFormatVersion"
SHUFFLE = "spark.sql.shuffle.partitions"
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
DATABRICKS_PROVIDER = "com.databricks.sql.streaming.state.RocksDBStateStoreProvider"


def every_conf(key: str, value: str) -> Callable[[Path], None]:
    """Pin ``key`` = ``value`` in every offsets file (a checkpoint another Spark or distribution wrote)."""
    return lambda r: [edit_conf(r, int(p.name), lambda c: c.update({key: value}))
                      for p in (r / C / "offsets").iterdir() if p.name.isdigit()]


def schema_of(fixture: str) -> Callable[[Path], None]:
    """Operator 0's state schema file replaced by another fixture's (its sidecar left as it was)."""
    return lambda r: shutil.copy2(FIXTURES / fixture / C / "state/0/0/_metadata/schema", r / C / "state/0/0/_metadata/schema")


def partition_files_of(source: int, target: int) -> Callable[[Path], None]:
    """Replace the state files of operator 0's partition ``target`` with partition ``source``'s (a restore that
    mixed partitions up), sidecars and RocksDB table files included (``_metadata/`` kept: the schema is partition
    0's)."""

    def run(root: Path) -> None:
        old, new = root / C / "state/0" / str(source), root / C / "state/0" / str(target)
        for path in new.iterdir():
            if path.is_file():
                path.unlink()
            elif path.name == "SSTs":
                shutil.rmtree(path)
        for path in old.iterdir():
            if path.is_file():
                shutil.copy2(path, new / path.name)
            elif path.name == "SSTs":
                shutil.copytree(path, new / path.name)

    return run


def log_file_of(source: str, target: str) -> Callable[[Path], None]:
    """Copy a log file (and its checksum sidecar) over another of the same log (a restore that took the wrong file)."""

    def run(root: Path) -> None:
        for old, new in ((source, target), (hadoop_crc(source), hadoop_crc(target))):
            shutil.copy2(root / old, root / new)

    return run


def state_file_of(source: str, target: str, operator: int = 0) -> Callable[[Path], None]:
    """Copy a state file (and its checksum sidecar) of ``operator`` over another, both given as ``partition/name``
    (a restore that took the wrong file)."""

    def run(root: Path) -> None:
        state = root / C / f"state/{operator}"
        for old, new in ((source, target), (hadoop_crc(source), hadoop_crc(target))):
            shutil.copy2(state / old, state / new)

    return run


def entry_made_a_directory(path: str, empty: bool = False) -> Callable[[Path], None]:
    """A directory holding a file (a copy made into a directory), or an ``empty`` one, where a checkpoint file is or
    would be, the file and its checksum sidecar gone."""

    def run(root: Path) -> None:
        target = root / C / path
        unlink(root, *(p for p in (f"{C}/{path}", f"{C}/{hadoop_crc(path)}") if (root / p).exists()))
        target.mkdir()
        if not empty:
            (target / target.name).write_bytes(b"")

    return run


def sink_log_made_a_directory(root: Path, batch: int) -> None:
    """The file sink's log file of ``batch`` (and its sidecar) replaced by a directory holding it."""
    log = root / "output/_spark_metadata"
    (log / f".{batch}.crc").unlink(missing_ok=True)
    (log / str(batch)).rename(log / f"{batch}.file")
    (log / str(batch)).mkdir()
    (log / f"{batch}.file").rename(log / str(batch) / str(batch))


def run_fix_of(code: str) -> Callable[[Path], None]:
    """Run the wmcheck command check prints (with the sink) for ``code`` on a copy as it is now."""

    def run(root: Path) -> None:
        from wmcheck.checkpoint.validate import check_location

        fix = finding_fix(check_location(str(root / C), str(root / "output")), code)
        assert fix is not None, code
        run_printed(fix, str(root / C))

    return run


def entry_made_a_file(path: str) -> Callable[[Path], None]:
    """A checkpoint directory replaced by a file of that name."""

    def run(root: Path) -> None:
        shutil.rmtree(root / C / path)
        (root / C / path).write_bytes(b"")

    return run


def data_files_of(root: Path, batch: int) -> list[Path]:
    """The data files the sink's log file of ``batch`` adds."""
    lines = (root / "output/_spark_metadata" / str(batch)).read_text().splitlines()[1:]
    return [Path(unquote(urlparse(json.loads(line)["path"]).path)) for line in lines]


def recompressed(path: Path) -> None:
    """Rewrite a Parquet file with the same rows, compressed with gzip (another size)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    pq.write_table(table, path, compression="gzip")


def logged_input(root: Path, log_batch: int) -> Path:
    """The input file the file-source log batch ``log_batch`` names (one file per batch in the fixtures)."""
    entry = json.loads((root / C / "sources/0" / str(log_batch)).read_text().splitlines()[1])
    return Path(unquote(urlparse(entry["path"]).path))


def crashed_before_commits(batch: int) -> Callable[[Path], None]:
    """The last batch, ``batch``, neither committed by the checkpoint nor by the sink (a crash while it ran, after
    its state was written): Spark re-runs it on restart."""

    def run(root: Path) -> None:
        for path in data_files_of(root, batch):
            path.unlink()
        unlink(root, f"{C}/commits/{batch}", f"{C}/commits/.{batch}.crc", f"output/_spark_metadata/{batch}",
               f"output/_spark_metadata/.{batch}.crc")

    return run


def logs_name_input_at(root: Path, old: Path) -> None:
    """The logs name the input where the copy was before it moved here (``old``, gone)."""
    from wmcheck.checkpoint import repair

    repair.run(str(root / C), repair.RelocateRequest(path_map={str(root): str(old)}), repair.RunOptions(execute=True, idle_ms=0))
    shutil.rmtree(root / C / "_wmcheck")


def sink_log_repeats(root: Path, batch: int, earlier: int) -> None:
    """The sink's log file of ``batch`` also names the first data file of ``earlier``'s (an edited or mixed log)."""
    path, other = root / "output/_spark_metadata" / str(batch), root / "output/_spark_metadata" / str(earlier)
    path.write_text(path.read_text().rstrip("\n") + "\n" + other.read_text().split("\n")[1])


def sink_log_deletes(root: Path, batch: int, earlier: int) -> None:
    """The sink's log file of ``batch`` also deletes the first data file of ``earlier``'s (an edited log)."""
    path, other = root / "output/_spark_metadata" / str(batch), root / "output/_spark_metadata" / str(earlier)
    entry = other.read_text().split("\n")[1].replace('"action":"add"', '"action":"delete"')
    path.write_text(path.read_text().rstrip("\n") + "\n" + entry)


def edit_entry(path: str, change: Callable[[dict], object], line: int = -1) -> Callable[[Path], None]:
    """Change a JSON line of a log file by hand (by default the last: a file log's last entry), its sidecar left
    stale."""

    def run(root: Path) -> None:
        target = root / path
        lines = target.read_text().rstrip("\n").split("\n")
        entry = json.loads(lines[line])
        change(entry)
        lines[line] = json.dumps(entry, separators=(",", ":"))
        target.write_text("\n".join(lines))

    return run


def drop_last_entry(path: str) -> Callable[[Path], None]:
    """Cut the last line of a log file (its sidecar left stale): a copy that lost a line at the end."""
    return lambda root: (root / path).write_text("\n".join((root / path).read_text().rstrip("\n").split("\n")[:-1]))


def last_logged_input(root: Path) -> Path:
    """The input file the last entry of ``sources/0/9.compact`` names."""
    entry = json.loads((root / C / SOURCE_COMPACT).read_text().rstrip("\n").split("\n")[-1])
    return Path(unquote(urlparse(entry["path"]).path))


def logged_time_ahead(days: int, on_disk: bool = False) -> Callable[[Path], None]:
    """The last entry of ``sources/0/9.compact`` logged ``days`` after batch 12's time: the log edited, or
    (``on_disk``) its input file written with a clock that far ahead, its modification time on disk the same."""

    def run(root: Path) -> None:
        ms = batch_timestamp_ms(root, 12) + days * 86_400_000
        edit_entry(f"{C}/{SOURCE_COMPACT}", lambda e: e.update(timestamp=ms))(root)
        if on_disk:
            os.utime(last_logged_input(root), (ms / 1000, ms / 1000))

    return run


def touched_and_rewound(root: Path) -> None:
    """WM067's instruction carried out: the input file's modification time set back to when it was written (as
    before the break), then the rewind to batch 10 with the file sink."""
    before = backup(root) / last_logged_input(root).relative_to(root)
    mtime = before.stat().st_mtime
    os.utime(last_logged_input(root), (mtime, mtime))
    run_cli("rewind", str(root / C), "--to-batch", "10", "--file-sink", str(root / "output"), "--execute", "--idle", "0")


def batch_12_never_ran(root: Path) -> None:
    """``agg_window_hdfs``'s (or its twin's) batch 12 without its commit, state version 13 and sink output."""
    crashed_before_commits(12)(root)
    for delta in (root / C / "state/0").glob("*/13.delta"):
        unlink(root, str(delta.relative_to(root)), hadoop_crc(str(delta.relative_to(root))))


def newest_state_back(root: Path) -> None:
    """Every partition of operator 0: its newest state file (and sidecar) replaced by the version before's, as a
    restore that took the previous file."""
    for part in (root / C / "state/0").iterdir():
        files = [f for f in part.iterdir() if re.fullmatch(r"\d+\.(delta|zip|changelog)", f.name)] if part.name.isdigit() else []
        if files:
            newest = max(files, key=lambda f: int(f.name.split(".")[0]))
            version, kind = newest.name.split(".")
            state_file_of(f"{part.name}/{int(version) - 1}.{kind}", f"{part.name}/{newest.name}")(root)


def new_input_aged(days: int) -> Callable[[Path], None]:
    """The new input file given a modification time ``days`` before its own (copied in with an old time)."""

    def run(root: Path) -> None:
        path = root / "input" / "zz-extra-0.json"
        mtime = path.stat().st_mtime - days * 86_400
        os.utime(path, (mtime, mtime))

    return run


def crashed_writing_offsets(root: Path) -> None:
    """The crash leftover: Spark was writing offsets/12 when it died (the file truncated), so batch 12 never ran:
    no commit, no state version 13, nothing in the sink."""
    batch_12_never_ran(root)
    offsets = root / C / "offsets/12"
    offsets.write_bytes(offsets.read_bytes()[:40])


def stopped_after_11(root: Path) -> None:
    """``agg_spark35`` as its query left it when it stopped after batch 11, its last batch that reads input: batch
    12, the no-data batch after it, never planned."""
    batch_12_never_ran(root)
    unlink(root, f"{C}/offsets/12", f"{C}/offsets/.12.crc")


def cut(path: str, keep: int = 20) -> Callable[[Path], None]:
    """Truncate a file to its first ``keep`` bytes (a write cut short)."""
    return lambda r: (r / C / path).write_bytes((r / C / path).read_bytes()[:keep])


def zeroed(path: str) -> Callable[[Path], None]:
    """Overwrite a file with as many zero bytes (a block lost by the storage)."""
    return lambda r: (r / C / path).write_bytes(bytes((r / C / path).stat().st_size))


def garbled(path: str, seed: int = 17) -> Callable[[Path], None]:
    """Overwrite a file with as many seeded random bytes."""
    import random

    return lambda r: (r / C / path).write_bytes(random.Random(seed).randbytes((r / C / path).stat().st_size))


def sst_named_only_by(root: Path, zip_path: str) -> Path:
    """An SST file that the snapshot ``zip_path`` names and no older snapshot of its partition does (else one it
    names)."""
    from wmcheck.statestore.rocksdb.zips import read_snapshot_zip

    folder = (root / C / zip_path).parent
    named = {z.name: {f.dfs_name for f in read_snapshot_zip(z.read_bytes(), z.name)[1].sst_files}
             for z in folder.glob("*.zip")}
    mine = named.pop((root / C / zip_path).name)
    return folder / "SSTs" / sorted(mine - set().union(*named.values()) or mine)[0]


def sst_only_in(zip_path: str) -> Callable[[Path], None]:
    """Delete an SST file that the snapshot ``zip_path`` names and no older snapshot of its partition does."""

    def run(root: Path) -> None:
        victim = sst_named_only_by(root, zip_path)
        victim.unlink()
        (victim.parent / f".{victim.name}.crc").unlink(missing_ok=True)

    return run


def tail_replaced(path: str, tail: bytes, drop: int = 0) -> Callable[[Path], None]:
    """Replace a file's last ``drop`` bytes by ``tail`` (bytes appended after a finished write, a damaged end
    block), its Hadoop checksum sidecar removed (a rewrite by hand)."""

    def run(root: Path) -> None:
        victim = root / C / path
        data = victim.read_bytes()
        victim.write_bytes(data[:len(data) - drop] + tail)
        (victim.parent / f".{victim.name}.crc").unlink(missing_ok=True)

    return run


def flipped(path: str, at: int = 1) -> Callable[[Path], None]:
    """Flip every bit of the byte at ``at`` (a storage error inside a block: the first block's, by default)."""

    def run(root: Path) -> None:
        data = bytearray((root / C / path).read_bytes())
        data[at] ^= 0xFF
        (root / C / path).write_bytes(bytes(data))

    return run


def sst_block_flipped(zip_path: str, block: str, sidecar: bool = True) -> Callable[[Path], None]:
    """Flip a byte of the ``data`` block (the first) or the ``index`` block of an SST file that the snapshot
    ``zip_path`` names and no older snapshot of its partition does; without its Hadoop ``sidecar`` (as on an object
    store, which keeps none)."""

    def run(root: Path) -> None:
        victim = sst_named_only_by(root, zip_path)
        at = 1 if block == "data" else index_offset(victim.read_bytes()) + 1
        flipped(str(victim.relative_to(root / C)), at)(root)
        if not sidecar:
            (victim.parent / f".{victim.name}.crc").unlink()

    return run


def index_offset(sst: bytes) -> int:
    """Where an SST file's index block starts (the footer's second block handle, after the metaindex's)."""
    footer, pos, handles = sst[-53:], 1, []
    for _ in range(4):
        value = shift = 0
        while True:
            value |= (footer[pos] & 0x7F) << shift
            pos += 1
            shift += 7
            if not footer[pos - 1] & 0x80:
                break
        handles.append(value)
    return handles[2]


V2_LAST = "state/0/0/13_9b7b7248-b867-4b17-9676-2e2e76cddb65.changelog"
V2_12 = "12_a6ef36aa-ff8f-440b-9a05-481416f9e91e"
"""Version 12 of ``checkpoint_v2``'s state/0/0: a snapshot and a changelog; 13's changelog names it in its lineage."""


def interrupted_rewind(root: Path) -> None:
    """A wmcheck rewind killed half way (its journal left behind)."""
    from wmcheck.checkpoint import repair
    from wmcheck.checkpoint.repair._hooks import injected

    try:
        with injected(fail_after=6):
            repair.run(str(root / C), repair.RewindRequest(to_batch=10, file_sink=str(root / "output")),
                       repair.RunOptions(execute=True, idle_ms=0))
    except repair.InjectedFailure:
        return
    raise AssertionError("the rewind was not interrupted")


def sink_names(root: Path, old: str, copy: bool) -> None:
    """The sink's log names its files under ``old`` (a sink moved from there, or copied when ``copy``)."""
    from wmcheck.checkpoint import repair

    elsewhere = root.parent / old / "output"
    repair.run(str(root / C), repair.RelocateRequest(path_map={str(root / "output"): str(elsewhere)},
                                                     file_sink=str(root / "output")), repair.RunOptions(execute=True, idle_ms=0))
    shutil.rmtree(root / C / "_wmcheck")
    if copy:
        shutil.copytree(root / "output", elsewhere)


def schemas_of_another_copy(root: Path) -> None:
    """The copy's operator metadata names the state schema files of another copy of it, which exists (a checkpoint
    copied from there, its sidecars consistent)."""
    from conftest import names_own_schemas

    other = root.parent / f"{root.name}-original"
    shutil.copytree(root / C, other / C)
    names_own_schemas(other / C)
    for path in (other / C / "state/0/_metadata/v2").iterdir():
        shutil.copy2(path, root / C / "state/0/_metadata/v2" / path.name)


V2_COMMIT_IDS = ',"stateUniqueIds":{"0":[["9b7b7248-b867-4b17-9676-2e2e76cddb65"],["5956177d-f9c8-47c9-809a-f0b62045e025"]]}'
"""What ``checkpoint_v2``'s commits/12 names: version 13's unique id in each of operator 0's two partitions."""
OLDER_STATE_V2 = "state/0/0/11_919e8e3b-955d-4321-b471-32e55e745d94.changelog"
# batches 11 and 12 planned, not committed, and not in the sink
def commit_files(batches: Iterable[int]) -> list[str]:
    """The commit files of ``batches`` with their Hadoop sidecars."""
    return [f"{C}/commits/{name}" for n in batches for name in (n, f".{n}.crc")]


UNCOMMITTED_11_12 = [f"{C}/commits/{n}" for n in (11, 12, ".11.crc", ".12.crc")] + [
    f"output/_spark_metadata/{n}" for n in (11, 12, ".11.crc", ".12.crc")]
CASES = [
    Case("checkpoint-removed", "WM000", AGG, lambda r: shutil.rmtree(r / C), WRONG),
    Case("deleted-empty-last-offsets", "WM029", AGG,  # the planned batch 12's empty offsets file deleted by hand
         lambda r: unlink(r, f"{C}/offsets/12", f"{C}/commits/12", f"{C}/commits/.12.crc"), FAILS,
         r"Multiple streaming queries are concurrently using .*/offsets", repair=True),
    Case("watermark-stuck-at-0", "WM014", AGG, lambda r: [set_watermark(r, b, 0) for b in range(13)], OK),
    Case("interrupted-rewind", "WM026", AGG, lambda r: interrupted_rewind(r), WRONG, repair=True),
    Case("sink-moved", "WM032", AGG, lambda r: sink_names(r, f"{r.name}-old", copy=False), WRONG, repair=True),
    Case("sink-copied", "WM033", AGG, lambda r: sink_names(r, f"{r.name}-old", copy=True), WRONG, repair=True),
    Case("unlisted-sink-file", "WM034", AGG, lambda r: shutil.copy2(
        next((r / "output").glob("part-*.parquet")), r / "output" / "part-00009-left-by-a-failed-task.snappy.parquet"), OK),
    Case("empty-last-offsets", "WM001", AGG, lambda r: (r / C / "offsets/12").write_text(""), FAILS, "",
         repair=True),
    Case("truncated-pending-offsets", "WM001", AGG, crashed_writing_offsets, FAILS, "", repair=True),
    Case("gap-before-last-offsets", "WM002", AGG, lambda r: unlink(r, f"{C}/offsets/11", f"{C}/offsets/.11.crc"),
         FAILS, "batch 11 doesn't exist", repair=True),
    Case("gap-in-older-offsets", "WM075", AGG, lambda r: unlink(r, f"{C}/offsets/5", f"{C}/offsets/.5.crc"), OK),
    Case("gaps-in-older-offsets-commits-kept", "WM075", AGG,  # Spark reads offsets/12 and 11 only
         lambda r: unlink(r, *[f"{C}/offsets/{n}" for n in range(1, 11)]), OK),
    Case("gap-in-commits", "WM003", AGG, lambda r: unlink(r, f"{C}/commits/5", f"{C}/commits/.5.crc"), OK),
    Case("commit-without-offsets", "WM004", AGG,
         lambda r: shutil.copy2(r / C / "commits/12", r / C / "commits/13"), FAILS, "", repair=True),
    Case("commit-without-offsets-in-the-middle", "WM004", AGG,  # offsets/11 gone, commits/11 kept (WM002 too)
         lambda r: unlink(r, f"{C}/offsets/11", f"{C}/offsets/.11.crc"), FAILS, "batch 11 doesn't exist", repair=True),
    Case("two-uncommitted-batches", "WM005", AGG, lambda r: unlink(r, *UNCOMMITTED_11_12), WRONG, repair=True),
    Case("commit-v2-under-format-1", "WM006", AGG, lambda r: edit(r, f"{C}/commits/12", "v1", "v2"), FAILS, "",
         repair=True),
    Case("metadata-removed", "WM007", AGG, lambda r: unlink(r, f"{C}/metadata", f"{C}/.metadata.crc"), FAILS,
         "STREAMING_CHECKPOINT_MISSING_METADATA_FILE", fix=restore(f"{C}/metadata", f"{C}/.metadata.crc")),
    Case("metadata-bad-id", "WM008", AGG, lambda r: edit(r, f"{C}/metadata", query_id(r)[:13], "not-a-uuid"), FAILS,
         "", fix=restore(f"{C}/metadata")),
    Case("temp-file", "WM009", AGG,
         lambda r: shutil.copy2(r / C / "offsets/12", r / C / "offsets/.13.5d2c0b1e-tmp.tmp"), OK),
    Case("orphaned-old-sidecar", "WM010", AGG, lambda r: shutil.copy2(r / C / "commits/.3.crc", r / C / "commits/.99.crc"), OK),
    Case("watermark-decreases", "WM011", AGG, lambda r: set_watermark(r, 11, 1704067200000), OK),
    Case("watermark-lowered-at-the-last-batch", "WM011", AGG, lambda r: set_watermark(r, 12, 1704067200000), OK,
         repair=True),  # the next batch starts from the lowered watermark: set it back (a raise)
    Case("commit-watermark-differs", "WM012", AGG,
         lambda r: edit(r, f"{C}/commits/10", "1704067274000", "1704067270000"), OK),
    Case("watermark-far-ahead", "WM013", AGG, lambda r: set_watermark(r, 12, batch_timestamp_ms(r, 12) + 2 * 86400_000),
         WRONG, repair=True),
    Case("conf-changes", "WM015", AGG,  # (a partition count change alone on a no-data batch is a repartition)
         lambda r: edit(r, f"{C}/offsets/12", "state.HDFSBackedStateStoreProvider", "state.RocksDBStateStoreProvider"),
         FAILS, "", repair=True),
    Case("state-delta-missing", "WM016", AGG, lambda r: unlink(r, f"{C}/state/0/1/13.delta", f"{C}/state/0/1/.13.delta.crc"),
         FAILS, "", repair=True),
    Case("state-delta-missing-where-older-offsets-are-purged", "WM016", COMPACTION,  # batch 10 alone: 'batch 9 doesn't
         # exist'; the fix keeps offsets/11 and re-runs batch 11 as planned
         lambda r: unlink(r, f"{C}/state/0/1/12.delta", f"{C}/state/0/1/.12.delta.crc"), FAILS, "", repair=True),
    Case("rocksdb-changelog-missing", "WM016", ROCKS,  # the last commit's state version, in one partition only
         lambda r: unlink(r, f"{C}/state/0/1/13.changelog", f"{C}/state/0/1/.13.changelog.crc"), FAILS, "", repair=True),
    Case("state-beyond-last-batch", "WM017", AGG,  # a stale delta: Spark writes its own over it at version 14
         lambda r: shutil.copy2(r / C / "state/0/1/5.delta", r / C / "state/0/1/14.delta"), OK, repair=True, rounds=2),
    Case("rocksdb-zip-ahead-without-changelog", "WM017", TWS,  # every commit uploads its own zip over the stale one
         lambda r: shutil.copy2(r / C / "state/0/0/2.zip", r / C / "state/0/0/11.zip"), OK, repair=True, rounds=2),
    Case("state-snapshot-ahead", "WM041", AGG,  # the first delta of a store is a full copy: a valid stale snapshot
         lambda r: shutil.copy2(r / C / "state/0/2/1.delta", r / C / "state/0/2/14.snapshot"), WRONG, repair=True,
         rounds=2),
    Case("state-delta-truncated", "WM039", AGG, cut("state/0/2/13.delta"), FAILS, "CANNOT_LOAD_STATE_STORE", repair=True),
    Case("state-delta-zeroed", "WM039", AGG, zeroed("state/0/2/13.delta"), FAILS, "CANNOT_LOAD_STATE_STORE"),
    Case("state-delta-garbled", "WM039", AGG, garbled("state/0/2/13.delta"), FAILS, "CANNOT_LOAD_STATE_STORE"),
    Case("rocksdb-changelog-truncated", "WM039", ROCKS, cut("state/0/0/13.changelog"), FAILS, "CANNOT_LOAD_STATE_STORE",
         repair=True),
    Case("rocksdb-changelog-garbled", "WM039", ROCKS, garbled("state/0/1/13.changelog"), FAILS, "CANNOT_LOAD_STATE_STORE"),
    Case("rocksdb-zip-zeroed", "WM040", ROCKS, zeroed("state/0/0/12.zip"), OK),
    Case("rocksdb-zip-truncated", "WM040", ROCKS, cut("state/0/1/12.zip", 200), OK),
    Case("rocksdb-sst-missing", "WM040", ROCKS, sst_only_in("state/0/0/12.zip"), OK),
    # the zip's metadata and its MANIFEST disagree on the table files: RocksDB's open fails, the zip is skipped
    Case("rocksdb-zip-metadata-without-a-table-its-manifest-names", "WM040", ROCKS, lambda r: zip_metadata_edited(
        r / C / "state/0/0/12.zip", lambda t: re.sub(r'\{"localFileName":"[^}]*\},', "", t, count=1)), OK),
    Case("rocksdb-zip-metadata-tables-swapped", "WM040", ROCKS, lambda r: zip_metadata_edited(
        r / C / "state/0/0/12.zip", lambda t: re.sub(r'"localFileName":"(\d+)\.sst"(.*?)"localFileName":"(\d+)\.sst"',
                                                      r'"localFileName":"\3.sst"\2"localFileName":"\1.sst"', t,
                                                      count=1)), OK),
    Case("rocksdb-sst-data-block-flipped", "WM040", ROCKS, sst_block_flipped("state/0/0/12.zip", "data"), OK),
    # its Hadoop sidecar left: Spark's copy of the SST fails its checksum (ChecksumException), the zip is skipped
    Case("rocksdb-sst-data-block-flipped-no-sidecar", "WM048", ROCKS,  # as on an object store: RocksDB opens it
         sst_block_flipped("state/0/0/12.zip", "data", sidecar=False), WRONG, repair=True),  # and scans stop there
    Case("rocksdb-sst-index-block-flipped-no-sidecar", "WM040", ROCKS,  # RocksDB fails to open the snapshot
         sst_block_flipped("state/0/0/12.zip", "index", sidecar=False), OK),
    # a zip restored without its Hadoop sidecar: Spark unzips it through the checksummed file system (ChecksumException)
    Case("rocksdb-zip-sidecar-stale-loaded", "WM039", "session_window_p3",  # no changelogs: no older zip to fall back on
         lambda r: shutil.copyfile(r / C / "state/0/0/3.zip", r / C / "state/0/0/4.zip"), FAILS, "ChecksumException",
         repair=True),
    Case("rocksdb-zip-sidecar-stale-skipped", "WM040", ROCKS,  # 10.zip + changelogs rebuild version 13
         lambda r: shutil.copyfile(r / C / "state/0/0/10.zip", r / C / "state/0/0/12.zip"), OK),
    Case("v2-changelog-truncated", "WM039", V2, cut(V2_LAST), FAILS, "CANNOT_LOAD_STATE_STORE", repair=True),
    Case("state-partition-missing", "WM018", AGG, lambda r: shutil.rmtree(r / C / "state/0/2"), FAILS, "",
         fix=restore(f"{C}/state/0/2")),
    Case("extra-state-partition", "WM019", AGG,
         lambda r: shutil.copytree(r / C / "state/0/2", r / C / "state/0/3"), OK),
    Case("unique-id-without-file", "WM020", V2, lambda r: unlink(r, f"{C}/{OLDER_STATE_V2}", f"{C}/{OLDER_STATE_V2}.crc"), OK),
    Case("v2-commit-and-lineage-disagree", "WM020", V2,  # commits/11 names another id for version 12 of state/0/0
         lambda r: edit(r, f"{C}/commits/11", V2_12.split("_")[1], "00000000-0000-4000-8000-000000000012"), OK),
    Case("v2-lineage-snapshot-missing", "WM010", V2,  # 13's lineage names 12's zip only: snapshot repair follows the
         lambda r: unlink(r, f"{C}/state/0/0/{V2_12}.zip", f"{C}/state/0/0/{V2_12}.zip.crc"), OK),  # older lineages
    Case("stale-hadoop-crc-offsets", "WM030", AGG,
         lambda r: edit(r, f"{C}/offsets/12", '"batchTimestampMs":', '"batchTimestampMs":1'), OK,
         fix=lambda r: unlink(r, f"{C}/offsets/.12.crc")),
    Case("stale-hadoop-crc-delta", "WM030", AGG,
         lambda r: shutil.copy2(r / C / "state/0/0/.12.delta.crc", r / C / "state/0/0/.13.delta.crc"), OK),
    Case("spark-checksum-mismatch", "WM021", V2,
         lambda r: shutil.copy2(r / C / "state/0/0/12_a6ef36aa-ff8f-440b-9a05-481416f9e91e.changelog.crc",
                                r / C / "state/0/0/13_9b7b7248-b867-4b17-9676-2e2e76cddb65.changelog.crc"),
         FAILS, "CHECKPOINT_FILE_CHECKSUM_VERIFICATION_FAILED",
         fix=lambda r: unlink(r, f"{C}/state/0/0/13_9b7b7248-b867-4b17-9676-2e2e76cddb65.changelog.crc")),
    Case("source-log-missing", "WM022", AGG, lambda r: unlink(r, f"{C}/sources/0/9.compact", f"{C}/sources/0/.9.compact.crc"),
         WRONG, repair=True),
    Case("source-logs-deleted", "WM022", AGG, lambda r: shutil.rmtree(r / C / "sources"), FAILS, "assertion failed",
         fix=restore(f"{C}/sources")),  # a new log starts at log batch 0, behind offsets/12's 9
    Case("source-log-other-interval", "WM023", COMPACTION,
         lambda r: shutil.copy2(r / C / "sources/0/9", r / C / "sources/0/10.compact"), FAILS, "",
         fix=restore(f"{C}/sources/0")),
    Case("sink-ahead", "WM024", AGG,
         lambda r: unlink(r, f"{C}/commits/12", f"{C}/commits/.12.crc", f"{C}/offsets/12", f"{C}/offsets/.12.crc"),
         WRONG, repair=True),
    Case("sink-behind", "WM025", AGG, lambda r: unlink(r, "output/_spark_metadata/12", "output/_spark_metadata/.12.crc"),
         WRONG, repair=True),
    Case("missing-last-commit-kept-sidecar", "WM029", AGG, lambda r: unlink(r, f"{C}/commits/12"), FAILS,
         r"Multiple streaming queries are concurrently using .*/commits", repair=True),
    Case("schemas-of-another-copy", "WM028", TWS, schemas_of_another_copy, OK, repair=True,
         then=lambda r: shutil.rmtree(r.parent / f"{r.name}-original")),  # the relocated copy then works alone
    Case("input-without-new-data", "WM038", STALL, lambda r: None, OK,  # the fixture's right input went idle
         remedy=lambda r: add_input(r / "input" / "right", 0)),
    Case("operators-after-applyinpandaswithstate", "WM042", NO_WATERMARK, lambda r: None, OK),  # as Spark left it
    Case("sink-log-gap", "WM031", AGG, lambda r: unlink(r, "output/_spark_metadata/10", "output/_spark_metadata/.10.crc"),
         FAILS, "BATCH_METADATA_NOT_FOUND", repair=True, extra_batches=7),
    Case("source-log-last-file-deleted", "WM029", AGG, lambda r: unlink(r, f"{C}/sources/0/9.compact"), FAILS,
         r"Multiple streaming queries are concurrently using .*/sources/0", repair=True),  # its sidecar left (WM022 too)
    Case("source-log-next-sidecar", "WM029", AGG, lambda r: shutil.copy2(r / C / "sources/0/.8.crc", r / C / "sources/0/.10.crc"),
         FAILS, r"Multiple streaming queries are concurrently using .*/sources/0", repair=True),
    Case("sink-log-next-sidecar", "WM029", AGG,
         lambda r: shutil.copy2(r / "output/_spark_metadata/.12.crc", r / "output/_spark_metadata/.13.crc"),
         FAILS, r"Multiple streaming queries are concurrently using .*/_spark_metadata", repair=True),
    Case("source-log-read-only", "WM037", AGG, lambda r: None, FAILS, r"sources/0.*Read-only file system",
         read_only=(f"{C}/sources/0",)),  # writable (what its instruction asks), it is the reference copy
    Case("state-partition-read-only", "WM037", AGG, lambda r: None, FAILS, r"state/0/1.*Read-only file system",
         read_only=(f"{C}/state/0/1",)),
    Case("conf-missing-from-last-offsets", "WM015", AGG,  # Spark's default for an unrecorded one is format 1
         lambda r: edit_conf(r, 12, lambda c: c.pop("spark.sql.streaming.aggregation.stateFormatVersion")), FAILS,
         "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE", repair=True),
    Case("row-checksums-turned-on-at-the-last-batch", "WM015", AGG, lambda r: edit_conf(r, 12, lambda c: c.update(
        {"spark.sql.streaming.stateStore.rowChecksum.enabled": "true"})), FAILS, "CANNOT_LOAD_STATE_STORE"),
    Case("conf-changes-the-restart-does-not-use", "WM044", AGG, both(  # in an older batch; a conf no operator uses
        lambda r: edit_conf(r, 5, lambda c: c.update({"spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER})),
        lambda r: edit_conf(r, 12, lambda c: c.update({"spark.sql.streaming.join.stateFormatVersion": "1"}))), OK),
    Case("offsets-without-metadata", "WM001", AGG, lambda r: edit_line(r, "offsets/12", 1, ""), FAILS,
         "watermarkTracker", repair=True),
    Case("offsets-watermark-with-a-leading-zero", "WM001", AGG, lambda r: hand_json(
        r / C / "offsets/12", lambda t: t.replace('"batchWatermarkMs":', '"batchWatermarkMs":0', 1)), FAILS,
         "Leading zeroes not allowed", repair=True),  # Jackson refuses it
    Case("offsets-blank-source-line", "WM043", AGG, lambda r: (r / C / "offsets/12").write_text(
        (r / C / "offsets/12").read_text() + "\n\n"), FAILS, r"There are \[2\] sources in the checkpoint offsets",
         repair=True),
    Case("operator-metadata-of-another-operator", "WM046", AGG,
         lambda r: edit(r, f"{C}/state/0/_metadata/metadata", '"stateStoreSave"', '"dedupe"'), FAILS,
         "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA", fix=lambda r: unlink(r, *OPERATOR_FILES)),
    Case("state-schema-of-another-query", "WM046", AGG, lambda r: shutil.copy2(
        FIXTURES / "dedup_watermark" / C / "state/0/0/_metadata/schema", r / C / "state/0/0/_metadata/schema"), FAILS,
         "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE", fix=lambda r: unlink(r, *OPERATOR_FILES)),
    Case("operator-metadata-unreadable", "WM045", AGG, cut("state/0/_metadata/metadata", 12), OK),
    Case("operator-metadata-partition-count", "WM045", AGG,
         lambda r: edit(r, f"{C}/state/0/_metadata/metadata", '"numPartitions":3', '"numPartitions":4'), OK),
    Case("offsets-zero-padded-name", "WM001", AGG, lambda r: shutil.copy2(r / C / "offsets/12", r / C / "offsets/013"),
         FAILS, r"offsets/13 does not exist", fix=lambda r: unlink(r, f"{C}/offsets/013")),
    Case("offsets-header-trailing-space", "WM001", AGG, first_line_is(f"{C}/offsets/12", b"v1 "), FAILS,
         r"Failed to read log file .*offsets/12", repair=True),
    Case("offsets-name-in-other-digits", "WM001", AGG, lambda r: shutil.copy2(r / C / "offsets/12", r / C / "offsets/\u0661\u0663"),
         FAILS, r"offsets/13 does not exist", fix=lambda r: unlink(r, f"{C}/offsets/\u0661\u0663")),  # Arabic-Indic 13
    Case("source-log-zero-padded-name", "WM001", AGG, lambda r: shutil.copy2(r / C / "sources/0/8", r / C / "sources/0/013"),
         FAILS, r"sources/0/1[03]", fix=lambda r: unlink(r, f"{C}/sources/0/013")),
    Case("sink-log-zero-padded-name", "WM001", AGG,
         lambda r: shutil.copy2(r / "output/_spark_metadata/12", r / "output/_spark_metadata/013"), WRONG,
         fix=lambda r: unlink(r, "output/_spark_metadata/013")),
    Case("rocksdb-snapshot-listed-as-the-version-loaded", "WM040", ROCKS, lambda r: shutil.copy2(
        r / C / "state/0/0/12.zip", r / C / "state/0/0/013.zip"), OK),  # taken for 13.zip, which is not there: skipped
    Case("rocksdb-snapshot-named-by-hand", "WM070", ROCKS, lambda r: shutil.copy2(r / C / "state/0/0/12.zip", r / C / "state/0/0/old.zip"),
         FAILS, r"CANNOT_LOAD_STATE_STORE", fix=lambda r: unlink(r, f"{C}/state/0/0/old.zip")),
    Case("hdfs-snapshot-zero-padded", "WM070", AGG, lambda r: shutil.copy2(r / C / "state/0/1/12.delta", r / C / "state/0/1/012.snapshot"),
         FAILS, r"CANNOT_LOAD_STATE_STORE", fix=lambda r: unlink(r, f"{C}/state/0/1/012.snapshot")),
    Case("hdfs-snapshot-named-by-hand", "WM070", AGG, lambda r: shutil.copy2(r / C / "state/0/1/13.delta", r / C / "state/0/1/x.snapshot"),
         FAILS, r"CANNOT_LOAD_STATE_STORE", fix=lambda r: unlink(r, f"{C}/state/0/1/x.snapshot")),
    # a full copy the next load starts from that its increments disagree with: Spark trusts it, never replays them
    Case("hdfs-delta-copied-to-snapshot", "WM072", AGG, state_file_of("0/13.delta", "0/13.snapshot"), WRONG,
         fix=lambda r: unlink(r, f"{C}/state/0/0/13.snapshot", f"{C}/state/0/0/.13.snapshot.crc")),  # a window lost
    Case("rocksdb-older-zip-over-the-newest", "WM072", ROCKS, state_file_of("0/10.zip", "0/12.zip"), WRONG,
         fix=lambda r: unlink(r, f"{C}/state/0/0/12.zip", f"{C}/state/0/0/.12.zip.crc")),
    # an HDFS delta deleting a key the version before lacks: not the file Spark wrote (it deletes only keys it held)
    Case("hdfs-delta-replaced-by-the-version-before", "WM078", "state_types", state_file_of("1/9.delta", "1/10.delta"),
         OK, repair=True),  # what the lost delta held the output did not need; the fix runs batch 9 again
    # a directory where Spark reads a state file, a file where it writes a directory
    Case("hdfs-snapshot-a-directory", "WM073", AGG, entry_made_a_directory("state/0/1/13.snapshot"), FAILS,
         r"CANNOT_LOAD_STATE_STORE", fix=lambda r: shutil.rmtree(r / C / "state/0/1/13.snapshot")),
    Case("hdfs-snapshot-an-empty-directory", "WM073", AGG, entry_made_a_directory("state/0/1/13.snapshot", empty=True),
         FAILS, r"CANNOT_LOAD_STATE_STORE", fix=lambda r: (r / C / "state/0/1/13.snapshot").rmdir()),
    Case("hdfs-delta-a-directory", "WM073", AGG, entry_made_a_directory("state/0/1/13.delta"), FAILS,  # WM016 too
         r"CANNOT_READ_DELTA_FILE_NOT_EXISTS", fix=lambda r: shutil.rmtree(r / C / "state/0/1/13.delta"),
         then=run_fix_of("WM016")),
    # a directory where a log file is: Spark's writes of that name and a rewind fail on it while it is there
    Case("sink-log-a-directory", "WM001", AGG, lambda r: sink_log_made_a_directory(r, 12), WRONG,  # readers fail
         fix=lambda r: shutil.rmtree(r / "output/_spark_metadata/12"), then=run_fix_of("WM025")),
    Case("offsets-a-directory", "WM001", AGG, entry_made_a_directory("offsets/12"), FAILS,
         "CONCURRENT_STREAM_LOG_UPDATE", fix=lambda r: shutil.rmtree(r / C / "offsets/12"), then=run_fix_of("WM004")),
    Case("operator-metadata-a-file", "WM073", AGG, entry_made_a_file("state/0/_metadata"), FAILS,
         "Destination exists and is not a directory", fix=lambda r: unlink(r, f"{C}/state/0/_metadata")),
    Case("sink-data-file-missing", "WM047", AGG, lambda r: data_files_of(r, 11)[0].unlink(), WRONG, repair=True),
    Case("sink-data-file-recompressed", "WM047", AGG, lambda r: recompressed(data_files_of(r, 11)[0]), WRONG,
         repair=True),  # the same rows, gzip instead of snappy: another size than the log records
    Case("state-schema-file-deleted", "WM027", TWS, lambda r: shutil.rmtree(r / C / "state/0/_stateSchema/default"), FAILS,
         r"state/0/_stateSchema/default/0_ca8ba419-8489-44a9-a404-06186defde9d does not exist",
         fix=restore(f"{C}/state/0/_stateSchema/default")),
    Case("operator-metadata-v2-deleted", "WM051", TWS, lambda r: shutil.rmtree(r / C / "state/0/_metadata/v2"), FAILS,
         "STDS_FAILED_TO_READ_OPERATOR_METADATA", fix=both(restore(f"{C}/state/0/_metadata/v2"), lambda r: unlink(
             r, f"{C}/state/0/_metadata/v2/4", f"{C}/state/0/_metadata/v2/.4.crc"))),  # an older file is enough
    Case("join-operator-metadata-v2-deleted", "WM051", "join_v3_p3",
         lambda r: shutil.rmtree(r / C / "state/0/_metadata/v2"), FAILS, "STDS_FAILED_TO_READ_OPERATOR_METADATA",
         fix=restore(f"{C}/state/0/_metadata/v2")),
    Case("file-source-offset-goes-back", "WM052", AGG,  # offsets/11 ends at log batch 9
         lambda r: edit(r, f"{C}/offsets/12", '{"logOffset":9}', '{"logOffset":8}'), FAILS, "assertion failed", repair=True),
    Case("only-the-last-offsets-kept", "WM002", AGG, lambda r: unlink(r, *[f"{C}/{log}/{n}" for log in ("offsets", "commits")
                                                                for b in range(12) for n in (b, f".{b}.crc")]),
         FAILS, "batch 11 doesn't exist", fix=lambda r: shutil.copy2(r / C / "offsets/12", r / C / "offsets/11")),
    Case("pending-batch-input-deleted", "WM049", TTL, both(crashed_before_commits(6), lambda r: logged_input(r, 6).unlink()),
         WRONG, fix=lambda r: restore(str(logged_input(r, 6).relative_to(r)))(r)),  # Spark skips it: one row lost
    Case("pending-batch-input-moved", "WM050", TTL,  # checkpoint and input moved here from r-before
         both(crashed_before_commits(6), lambda r: logs_name_input_at(r, r.parent / f"{r.name}-before")), FAILS,
         r"Wrong basePath .*/input for the root path: .*-before/input/run1-003\.json", repair=True),
    Case("last-batch-input-moved", "WM050", TTL, lambda r: logs_name_input_at(r, r.parent / f"{r.name}-before"), FAILS,
         r"Wrong basePath .*/input for the root path: .*-before/input/run1-003\.json", repair=True),  # committed too
    Case("sink-log-gone", "WM025", AGG, lambda r: shutil.rmtree(r / "output/_spark_metadata"), WRONG,
         fix=restore("output/_spark_metadata")),  # a cleanup of '_' directories: Spark starts a new log at batch 13
    Case("state-metadata-removed-sidecars-kept", "WM029", AGG,  # Spark writes both again when they are missing
         lambda r: unlink(r, f"{C}/state/0/_metadata/metadata", f"{C}/state/0/0/_metadata/schema"), FAILS,
         r"Rename destination .*/state/0/(0/)?_metadata/\.(metadata|schema)\.crc already exists",
         fix=lambda r: unlink(r, f"{C}/state/0/_metadata/.metadata.crc", f"{C}/state/0/0/_metadata/.schema.crc")),
    Case("operator-state-directory-deleted", "WM053", "agg_then_agg", lambda r: shutil.rmtree(r / C / "state/0"), FAILS,
         "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA", fix=restore(f"{C}/state/0")),
    # a stateful operator's directory holding another's state: the fix swaps them back, or restores the one copied over
    Case("operator-state-directories-swapped", "WM080", "dedup_then_agg", swapped_dirs(f"{C}/state/0", f"{C}/state/1"),
         FAILS, "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE", fix=swapped_dirs(f"{C}/state/0", f"{C}/state/1")),
    Case("join-state-directory-swapped", "WM080", "join_then_agg", swapped_dirs(f"{C}/state/0", f"{C}/state/1"),
         FAILS, "CANNOT_READ_DELTA_FILE_NOT_EXISTS", fix=swapped_dirs(f"{C}/state/0", f"{C}/state/1")),
    Case("operator-state-copied-over-another", "WM080", "agg_then_agg", both(
        lambda r: shutil.rmtree(r / C / "state/1"), lambda r: shutil.copytree(r / C / "state/0", r / C / "state/1")),
         FAILS, "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA", fix=restore(f"{C}/state/1")),
    Case("state-directory-emptied", "WM053", AGG, lambda r: [shutil.rmtree(p) for p in (r / C / "state").iterdir()], FAILS,
         "STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY", fix=restore(f"{C}/state")),
    Case("v2-state-directory-removed", "WM053", V2, lambda r: shutil.rmtree(r / C / "state"), FAILS,  # commits name op 0
         "STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY", fix=restore(f"{C}/state")),
    Case("pending-offsets-of-another-source-kind", "WM054", AGG, both(  # a Kafka offset where the file source's was
        crashed_before_commits(12), lambda r: edit(r, f"{C}/offsets/12", '{"logOffset":9}', '{"topic":{"0":5}}')),
         FAILS, "No usable value for logOffset", repair=True),
    # files Spark does not read on restart, cut short: it restarts from the last two offsets files, the newest
    # commit, and each file log's newest compact file (9.compact) and the last batch's source log batches (9)
    Case("old-offsets-cut", "WM055", AGG, cut("offsets/5", 30), OK),
    Case("old-commit-cut", "WM055", AGG, cut("commits/5", 5), OK),
    Case("source-log-before-compact-cut", "WM055", AGG, cut("sources/0/5", 40), OK),
    Case("sink-log-before-compact-cut", "WM055", AGG, lambda r: (r / "output/_spark_metadata/5").write_bytes(
        (r / "output/_spark_metadata/5").read_bytes()[:60]), OK),
    Case("sink-log-file-cut", "WM001", AGG, lambda r: (r / "output/_spark_metadata/11").write_bytes(
        (r / "output/_spark_metadata/11").read_bytes()[:60]), WRONG, repair=True),  # the sink's readers fail
    # an older log batch's input read again: a processing-time transformWithState drops no row as late
    Case("source-log-older-file-of-the-batch-before-no-late-rows", "WM064", TTL, lambda r: shutil.copy2(
        r / C / "sources/0/2", r / C / "sources/0/3"), WRONG, fix=restore(f"{C}/sources/0/3")),
    # the last batch's offsets a copy of the batch before's: its input (a Python data source's files 7 to 9, a file
    # source's log batch 2) is read again
    Case("last-offsets-copied-from-the-batch-before", "WM077", "python_source", lambda r: shutil.copy(
        r / C / "offsets/1", r / C / "offsets/2"), WRONG, fix=restore(f"{C}/offsets/2")),
    Case("last-offsets-copied-from-the-batch-before-file-source", "WM077", "tws_timers_ttl_p3", lambda r: shutil.copy(
        r / C / "offsets/1", r / C / "offsets/2"), WRONG, fix=restore(f"{C}/offsets/2")),
    Case("sink-log-names-a-file-twice", "WM056", AGG, lambda r: sink_log_repeats(r, 12, 11), WRONG, repair=True),
    # log batch 5 replaced by 4, which names a file without rows: batch 5's data file (rows) is no longer listed
    Case("sink-log-replaced-by-the-one-before-losing-rows", "WM056", "dedup_then_agg", lambda r: shutil.copy2(
        r / "output/_spark_metadata/4", r / "output/_spark_metadata/5"), WRONG, repair=True),
    Case("sink-log-deletes-a-file", "WM061", AGG, lambda r: sink_log_deletes(r, 12, 11), WRONG, repair=True),
    Case("pending-offsets-without-the-source-offset", "WM054", TTL, both(crashed_before_commits(6), lambda r: edit(
        r, f"{C}/offsets/6", '{"logOffset":6}', "-")), WRONG, repair=True),  # re-run from no offset: input read again
    Case("offsets-before-the-pending-batch-without-the-source-offset", "WM054", TTL, both(crashed_before_commits(6),
         lambda r: edit(r, f"{C}/offsets/5", '{"logOffset":5}', "-")), WRONG, fix=restore(f"{C}/offsets/5")),
    Case("conf-value-refused-in-the-last-offsets", "WM057", AGG, lambda r: edit_conf(r, 12, lambda c: c.update(
        {"spark.sql.streaming.join.stateFormatVersion": "5"})), FAILS,  # a conf no operator uses: refused all the same
         r"INVALID_CONF_VALUE\.REQUIREMENT\] The value '5' in the config \"spark\.sql\.streaming\.join\.stateFormatVersion",
         repair=True),
    Case("conf-value-refused-in-every-offsets", "WM057", AGG, every_conf(AGG_FORMAT, "3"), FAILS,  # a newer Spark's
         r"INVALID_CONF_VALUE\.REQUIREMENT\] The value '3' in the config \"spark\.sql\.streaming\.aggregation",
         fix=every_conf(AGG_FORMAT, "2")),
    Case("conf-value-null-in-the-last-offsets", "WM057", AGG, lambda r: edit_conf(r, 12, lambda c: c.update(
        {AGG_FORMAT: None})), FAILS, "value cannot be null for key: spark.sql.streaming.aggregation.stateFormatVersion",
         repair=True),
    Case("conf-value-refused-of-a-conf-spark35-does-not-restore", "WM057", AGG, lambda r: edit_conf(r, 12, lambda c: c.update(
        {"spark.sql.streaming.stateStore.encodingFormat": "json"})), FAILS,  # Spark 3.5 restarts: it ignores the conf
         r"INVALID_CONF_VALUE\.REQUIREMENT\] The value 'json' in the config \"spark\.sql\.streaming\.stateStore\.encodingFormat",
         repair=True),
    Case("state-provider-of-another-distribution", "WM057", AGG, every_conf(PROVIDER, DATABRICKS_PROVIDER), FAILS,
         r"com\.databricks\.sql\.streaming\.state\.RocksDBStateStoreProvider", fix=every_conf(PROVIDER, HDFS_PROVIDER)),
    Case("partition-count-lowered-in-the-last-offsets", "WM015", AGG, lambda r: edit_conf(r, 12, lambda c: c.update(
        {SHUFFLE: "2"})), WRONG, repair=True),  # no repartition: its state is batch 12's deltas in all 3 partitions
    Case("partition-count-raised-in-the-last-offsets", "WM015", ROCKS, lambda r: edit_conf(r, 12, lambda c: c.update(
        {SHUFFLE: "4"})), FAILS, r"CANNOT_LOAD_STATE_STORE\.CANNOT_READ_STREAMING_STATE_FILE", repair=True),
    Case("partition-count-one-in-the-last-offsets", "WM015", ROCKS, lambda r: edit_conf(r, 12, lambda c: c.update(
        {SHUFFLE: "1"})), WRONG, repair=True),  # every key hashes to partition 0: no key shows the wrong partition
    Case("partition-count-lowered-in-every-offsets", "WM074", AGG, every_conf(SHUFFLE, "2"), WRONG,
         fix=every_conf(SHUFFLE, "3")),
    Case("partition-count-raised-in-every-offsets", "WM074", AGG, every_conf(SHUFFLE, "5"), FAILS,
         r"CANNOT_LOAD_STATE_STORE\.CANNOT_READ_DELTA_FILE_NOT_EXISTS", fix=every_conf(SHUFFLE, "3")),
    Case("provider-edited-in-every-offsets", "WM074", AGG, every_conf(PROVIDER, ROCKSDB_PROVIDER), FAILS,
         r"CANNOT_READ_STREAMING_STATE_FILE\].*1\.changelog does not exist", fix=every_conf(PROVIDER, HDFS_PROVIDER)),
    Case("rocksdb-provider-edited-in-every-offsets", "WM074", ROCKS, every_conf(PROVIDER, HDFS_PROVIDER), FAILS,
         r"CANNOT_READ_DELTA_FILE_NOT_EXISTS\].*1\.delta", fix=every_conf(PROVIDER, ROCKSDB_PROVIDER)),
    Case("join-provider-edited-in-every-offsets", "WM074", "join_stream_stream", every_conf(PROVIDER, ROCKSDB_PROVIDER),
         FAILS, r"CANNOT_READ_STREAMING_STATE_FILE", fix=every_conf(PROVIDER, HDFS_PROVIDER)),  # four stores a partition
    Case("aggregation-format-edited-in-every-offsets", "WM074", AGG, every_conf(AGG_FORMAT, "1"), FAILS,
         r"STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE", fix=every_conf(AGG_FORMAT, "2")),
    Case("join-format-1-in-every-offsets", "WM074", "join_stream_stream", every_conf(JOIN_FORMAT, "1"), FAILS,
         r"STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE", fix=every_conf(JOIN_FORMAT, "2")),
    Case("join-format-3-in-every-offsets", "WM074", "join_stream_stream", every_conf(JOIN_FORMAT, "3"), FAILS,
         r"STDS_FAILED_TO_READ_OPERATOR_METADATA", fix=every_conf(JOIN_FORMAT, "2")),
    Case("join-format-2-on-column-families", "WM074", "join_v4_p3", every_conf(JOIN_FORMAT, "2"), FAILS,
         r"CANNOT_READ_STREAMING_STATE_FILE\].*left-keyToNumValues/1\.changelog does not exist",
         fix=every_conf(JOIN_FORMAT, "4")),
    Case("group-state-format-1-in-every-offsets", "WM074", "fmgws_then_agg", every_conf(GROUP_STATE_FORMAT, "1"), FAILS,
         r"STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE", fix=every_conf(GROUP_STATE_FORMAT, "2")),
    Case("avro-encoding-on-rocksdb-aggregation", "WM074", ROCKS, every_conf(ENCODING, "avro"), FAILS,
         r"StateSchemaProvider should always be defined for the Avro encoder", fix=every_conf(ENCODING, "unsaferow")),
    Case("avro-encoding-over-unsaferow-transform-with-state", "WM074", TWS, every_conf(ENCODING, "avro"), WRONG,
         fix=every_conf(ENCODING, "unsaferow")),
    Case("avro-encoding-on-aggregation-after-transform-with-state", "WM074", NO_WATERMARK, every_conf(ENCODING, "avro"),
         FAILS, r"StateSchemaProvider should always be defined for the Avro encoder",
         fix=every_conf(ENCODING, "unsaferow")),
    Case("source-evolution-on-unnamed-sources", "WM074", AGG, every_conf(SOURCE_EVOLUTION, "true"), FAILS,
         r"All sources should be named", fix=every_conf(SOURCE_EVOLUTION, "false")),
    Case("state-partitions-swapped", "WM058", "fmgws_then_agg", swapped_dirs(f"{C}/state/1/0", f"{C}/state/1/1"), WRONG,
         fix=swapped_dirs(f"{C}/state/1/0", f"{C}/state/1/1")),  # partition 0's schema file moved with its directory
    Case("state-partition-restored-from-another", "WM058", AGG, partition_files_of(1, 0), WRONG,  # a window lost
         fix=restore(f"{C}/state/0/0")),
    Case("rocksdb-partition-restored-from-another", "WM058", ROCKS, partition_files_of(1, 0), WRONG,
         fix=restore(f"{C}/state/0/0")),
    # partition 0's 13.changelog held only the removal of the window batch 12 evicted; partition 1's holds no row
    Case("rocksdb-changelog-of-another-partition-without-rows", "WM062", ROCKS, state_file_of("1/13.changelog",
         "0/13.changelog"), WRONG, repair=True),  # the window emitted again
    Case("state-delta-replaced-by-the-version-before", "WM062", AGG, state_file_of("2/12.delta", "2/13.delta"), WRONG,
         repair=True),  # 13.delta removed the window batch 12 evicted: emitted again
    # below a stream-stream join the aggregation's own eviction watermark is unknown without the plan: the windows
    # its files remove bound it; 5.delta's window 00:00-00:10 (removed by 6.delta) is loaded again
    Case("state-delta-replaced-by-the-version-before-below-a-join", "WM062", "join_then_agg",
         state_file_of("0/5.delta", "0/6.delta"), WRONG, repair=True),
    Case("state-schema-of-another-aggregation", "WM059", AGG, schema_of("compaction"), FAILS,  # its key: window only
         "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE", fix=lambda r: unlink(r, *OPERATOR_FILES[2:])),
    Case("state-value-schema-of-another-aggregation", "WM059", AGG, schema_of("sliding_window"), FAILS,  # count only
         "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE", fix=lambda r: unlink(r, *OPERATOR_FILES[2:])),
    Case("v2-commit-without-unique-ids", "WM060", V2, lambda r: edit(r, f"{C}/commits/12", V2_COMMIT_IDS, ""), FAILS,
         "CANNOT_LOAD_STATE_STORE", repair=True),
    Case("v2-commit-naming-one-partition", "WM060", V2, lambda r: edit(r, f"{C}/commits/12", V2_COMMIT_IDS,
         ',"stateUniqueIds":{"0":[["9b7b7248-b867-4b17-9676-2e2e76cddb65"]]}'), FAILS, "ArrayIndexOutOfBoundsException"),
    Case("file-source-offset-emptied", "WM054", AGG, lambda r: edit(r, f"{C}/offsets/12", '{"logOffset":9}', "{}"),
         FAILS, "No usable value for logOffset"),  # committed; the same rewind as the pending Kafka offset's
    Case("operator-metadata-v2-next-sidecar", "WM029", TWS,
         lambda r: shutil.copy2(r / C / "state/0/_metadata/v2/.4.crc", r / C / "state/0/_metadata/v2/.9.crc"), FAILS,
         r"Rename destination .*/state/0/_metadata/v2/\.9\.crc already exists", repair=True),
    Case("sink-log-entry-size-a-string", "WM063", AGG, edit_entry(SINK_LOG_12, lambda e: e.update(
        size=str(e["size"]))), WRONG, repair=True),  # every read of the sink fails: 'No usable value for size'
    Case("sink-log-entry-without-action", "WM063", AGG, edit_entry(SINK_LOG_12, lambda e: e.pop("action")), WRONG,
         repair=True),  # a null action is read (not "delete": kept), a missing one fails every read of the sink
    Case("sink-log-entry-marked-a-directory", "WM063", AGG, edit_entry(SINK_LOG_12, lambda e: e.update(isDir=True)),
         WRONG, repair=True),  # the sink's readers skip it: its rows lost
    Case("sink-log-path-another-authority", "WM063", AGG, edit_entry(SINK_LOG_12, lambda e: e.update(
        path=e["path"].replace("file:///", "file://localhost/"))), WRONG, repair=True),  # not the sink's directory: dropped
    Case("source-log-entry-timestamp-a-string", "WM063", AGG, edit_entry(f"{C}/{SOURCE_COMPACT}", lambda e: e.update(
        timestamp=str(e["timestamp"]))), FAILS, "No usable value for timestamp", fix=restore(f"{C}/{SOURCE_COMPACT}")),
    Case("source-log-entry-without-batch-id", "WM063", AGG, edit_entry(f"{C}/{SOURCE_COMPACT}", lambda e: e.pop(
        "batchId")), FAILS, "No usable value for batchId", fix=restore(f"{C}/{SOURCE_COMPACT}")),
    Case("source-log-loses-its-last-batch", "WM064", AGG, drop_last_entry(f"{C}/{SOURCE_COMPACT}"), WRONG,
         fix=restore(f"{C}/{SOURCE_COMPACT}")),  # log batch 9's only file read again: its rows counted twice
    Case("source-log-path-without-scheme", "WM064", AGG, edit_entry(f"{C}/{SOURCE_COMPACT}", lambda e: e.update(
        path=e["path"].replace("file://", ""))), WRONG, fix=restore(f"{C}/{SOURCE_COMPACT}")),
    Case("source-log-path-spelled-otherwise", "WM064", AGG, edit_entry(f"{C}/{SOURCE_COMPACT}", lambda e: e.update(
        path=e["path"].replace("file:///", "file:/").replace("/input/run2-", "//input/./run2%2D"))), WRONG,
         fix=restore(f"{C}/{SOURCE_COMPACT}")),  # seen files are matched by the logged string: read again
    Case("conf-value-a-boolean", "WM001", AGG, lambda r: edit(r, f"{C}/offsets/12", f'"{STRICT}":"true"', f'"{STRICT}":true'),
         FAILS, r"No usable value for conf", repair=True),  # json4s reads the conf as Map[String, String]
    Case("operator-metadata-name-spark-never-writes", "WM046", AGG, lambda r: edit(
        r, f"{C}/state/0/_metadata/metadata", '"stateStoreSave"', '"StateStoreSave"'), FAILS,
         "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA", fix=lambda r: unlink(r, *OPERATOR_FILES[:2])),
    Case("state-schema-field-with-another-key", "WM001", AGG, lambda r: schema_json_edited(
        r / C / AGG_SCHEMA, value=lambda t: t.replace('{"name":"count",', '{"name":"count","x":1,', 1)), FAILS,
         r"UNSUPPORTED_DATATYPE|INVALID_JSON_DATA_TYPE", fix=restore(f"{C}/{AGG_SCHEMA}")),  # DataType.fromJson's patterns
    Case("v2-stopped-between-the-sink-and-the-commit", "WM066", V2, lambda r: unlink(r, f"{C}/commits/12", f"{C}/commits/.12.crc"),
         FAILS, "assertion failed: CheckpointInfo length: 0", repair=True),  # the sink skips the re-run batch 12
    Case("sink-log-first-file-deleted", "WM031", "dedup_watermark", lambda r: unlink(
        r, "output/_spark_metadata/0", "output/_spark_metadata/.0.crc"), FAILS, r"BATCH_METADATA_NOT_FOUND.*_spark_metadata/0",
         fix=restore("output/_spark_metadata/0")),  # no compact file yet: read from batch 0; fails at compaction batch 9
    Case("source-log-first-file-deleted", "WM022", "dedup_watermark", lambda r: unlink(
        r, f"{C}/sources/0/0", f"{C}/sources/0/.0.crc"), FAILS, r"sources/0/0 doesn't exist",
         fix=restore(f"{C}/sources/0/0")),  # no compact file yet: Spark restores its seen files from log batch 0
    Case("source-log-file-of-the-other-source", "WM064", "join_stream_stream", lambda r: shutil.copy2(
        r / C / "sources/0/5", r / C / "sources/1/5"), WRONG, fix=restore(f"{C}/sources/1/5")),  # right file read again
    Case("source-log-file-of-an-earlier-batch", "WM064", COMPACTION, log_file_of(f"{C}/sources/0/7", f"{C}/sources/0/9"),
         WRONG, fix=restore(f"{C}/sources/0/9", hadoop_crc(f"{C}/sources/0/9"))),  # log batch 9's input file read again
    # an older log batch's input read again while the watermark has not moved since the batch that read it
    Case("source-log-older-file-read-again-at-a-held-watermark", "WM064", "stalled_event_time",
         log_file_of(f"{C}/sources/0/3", f"{C}/sources/0/4"), WRONG,
         fix=restore(f"{C}/sources/0/4", hadoop_crc(f"{C}/sources/0/4"))),  # log batch 4's rows counted twice
    Case("source-log-file-of-the-batch-before", "WM064", TWS, log_file_of(f"{C}/sources/0/5", f"{C}/sources/0/6"),
         WRONG, fix=restore(f"{C}/sources/0/6", hadoop_crc(f"{C}/sources/0/6"))),  # the newest input file read again
    Case("sink-compact-file-of-an-earlier-compaction", "WM076", COMPACTION, log_file_of(
        "output/_spark_metadata/8.compact", "output/_spark_metadata/11.compact"), WRONG,
         fix=restore("output/_spark_metadata/11.compact", "output/_spark_metadata/.11.compact.crc")),  # 9-11's rows lost
    Case("sink-compact-file-of-the-first-batch", "WM076", AGG, log_file_of("output/_spark_metadata/0", "output/_spark_metadata/9.compact"),
         WRONG, repair=True),  # batches 1-9's rows lost; rewound to 8, Spark compacts the log again
    Case("transformwithstate-schema-of-another-query", "WM046", TTL, lambda r: shutil.copy2(
        FIXTURES / "tws_pandas" / C / TWS_SCHEMA, r / C / TTL_SCHEMA), FAILS, "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
         fix=restore(f"{C}/{TTL_SCHEMA}")),  # no TTL families, event-time timers
    Case("source-log-time-a-month-ahead", "WM067", AGG, logged_time_ahead(30), WRONG, repair=True),  # new input skipped
    Case("input-file-time-a-month-ahead", "WM067", AGG, logged_time_ahead(30, on_disk=True), WRONG,
         fix=touched_and_rewound),  # a skewed clock where run2-002.json was written: rewound alone, logged again
    Case("input-file-older-than-the-file-age", "WM071", AGG, new_input_aged(30), WRONG,  # never read
         fix=lambda r: os.utime(r / "input" / "zz-extra-0.json")),  # touched: read as new
    Case("join-counts-of-the-version-before", "WM068", "join_stream_stream", state_file_of(
        "0/left-keyToNumValues/7.delta", "0/left-keyToNumValues/8.delta"), FAILS,  # its rows stay at version 8
         r"STREAM_STREAM_JOIN_INCONSISTENT_STATE\.NULL_VALUE\] .* Value at index 1 is null while numValues is 2", repair=True),
    Case("rocksdb-join-counts-of-the-version-before", "WM068", "join_v2_p3", lambda r: [state_file_of(
        f"{p}/left-keyToNumValues/3.zip", f"{p}/left-keyToNumValues/4.zip")(r) for p in range(3)], FAILS,
         r"STREAM_STREAM_JOIN_INCONSISTENT_STATE\.NULL_VALUE\]", repair=True),  # every partition's counts of version 3
    Case("session-state-of-the-version-before", "WM069", "session_window_p3", newest_state_back, WRONG,
         repair=True),  # sessions batch 3 closed are emitted again
    Case("group-state-of-the-version-before", "WM069", "pandas_state_p3", newest_state_back, WRONG,
         repair=True),  # a group batch 3 timed out and removed times out again, from an old state
    Case("timer-state-of-the-version-before", "WM069", TWS, newest_state_back, WRONG,
         repair=True),  # an event-time timer batch 8 fired fires again, its group from an old state
    Case("timeout-state-of-the-version-before", "WM069", "pandas_state_timeout", newest_state_back, WRONG,
         repair=True, sink=False),  # update mode, foreachBatch output: counts continue from an old state
    Case("last-offsets-watermark-raised", "WM065", AGG, edit_entry(f"{C}/offsets/12", lambda m: m.update(
        batchWatermarkMs=m["batchWatermarkMs"] + 3_600_000), line=1), WRONG, repair=True),  # the new rows dropped as late
    # python_source's last batch read input and moved the watermark 32 s: the next batch evicts by the older one
    Case("last-commit-watermark-lowered-after-input", "WM065", "python_source", edit_entry(
        f"{C}/commits/2", lambda m: m.update(nextBatchWatermarkMs=m["nextBatchWatermarkMs"] - 3_600_000), line=1),
         WRONG, fix=restore(f"{C}/commits/2")),
    Case("last-commit-watermark-raised-without-input", "WM079", AGG, edit_entry(f"{C}/commits/12", lambda m: m.update(
        nextBatchWatermarkMs=m["nextBatchWatermarkMs"] + 3_600_000), line=1), WRONG, repair=True),  # windows emitted early
    Case("last-commit-watermark-raised-in-sessions", "WM079", "session_window_p3", edit_entry(
        f"{C}/commits/3", lambda m: m.update(nextBatchWatermarkMs=m["nextBatchWatermarkMs"] + 3_600_000), line=1),
         WRONG, repair=True),
]

SILENT = [  # files edited or named by hand that Spark restarts from as the control run does: check reports no error
    # a pinned conf the state was written without, which Spark takes all the same
    Case("join-format-3-on-format-4-state", "", "join_v4_p3", every_conf(JOIN_FORMAT, "3"), OK),
    Case("avro-encoding-on-hdfs-state", "", AGG, every_conf(ENCODING, "avro"), OK),
    # an older delta of an aggregation that feeds another: its lost changes do not reach the output here
    Case("upstream-delta-replaced-by-the-version-before", "", "agg_then_agg", state_file_of("0/5.delta", "0/6.delta",
                                                                                          operator=1), OK),
    # the newest: the windows it loads again are emitted again, and dropped downstream as late
    Case("upstream-newest-delta-replaced-by-the-version-before", "", "chained_aggs",
         state_file_of("0/12.delta", "0/13.delta", operator=1), OK),
    Case("upstream-newest-delta-replaced-by-an-older-one", "", "agg_then_agg",
         state_file_of("0/11.delta", "0/13.delta", operator=1), OK),
    Case("upstream-group-state-of-the-version-before", "", "fmgws_then_agg",
         state_file_of("0/8.delta", "0/9.delta", operator=1), OK),
    # Spark neither writes nor restores the checkpoint format: the state files show it
    Case("checkpoint-format-1-named-over-format-2", "", V2, every_conf(CHECKPOINT_FORMAT, "1"), OK),
    Case("checkpoint-format-2-named-over-format-1", "", ROCKS, every_conf(CHECKPOINT_FORMAT, "2"), OK),
    Case("every-commit-deleted", "", AGG, lambda r: unlink(r, *commit_files(range(13))), OK),  # batches ran: sink, state
    Case("commits-deleted-but-the-first", "", AGG, lambda r: unlink(r, *commit_files(range(1, 13))), OK),
    # a header's number is read with Integer.parseInt; only the commit log trims the line first
    Case("header-sign-source-log", "", AGG, first_line_is(f"{C}/sources/0/9.compact", b"v+1"), OK),
    Case("header-other-digit-offsets", "", AGG, first_line_is(f"{C}/offsets/12", "v\u0661".encode()), OK),
    Case("header-spaces-commit", "", AGG, first_line_is(f"{C}/commits/12", b" v1 "), OK),
    # Spark's JSON reader (json4s on Jackson) takes a line's first JSON value and ignores what follows it
    Case("json-trailing-metadata", "", AGG, line_ends_in(f"{C}/metadata", b"}} xyz", 0), OK),
    Case("json-trailing-offsets-metadata", "", AGG, line_ends_in(f"{C}/offsets/12", b" xyz", 1), OK),
    Case("json-trailing-offsets-source", "", AGG, line_ends_in(f"{C}/offsets/12", b"}", 2), OK),
    Case("json-trailing-commit", "", AGG, line_ends_in(f"{C}/commits/12", b"xyz", 1), OK),
    Case("json-trailing-source-log", "", AGG, line_ends_in(f"{C}/sources/0/9.compact", b",junk"), OK),
    Case("json-trailing-sink-log", "", AGG, line_ends_in("output/_spark_metadata/12", b" trailing"), OK),
    # the last batch's watermarks edited by a second, or lowered where the batch read no input (Spark takes the larger
    # of offsets/L's and commits/L's), or raised where no operator emits what it evicts: the control run's output
    Case("last-offsets-watermark-raised-a-second", "", AGG, edit_entry(f"{C}/offsets/12", lambda m: m.update(
        batchWatermarkMs=m["batchWatermarkMs"] + 1000), line=1), OK),
    Case("last-commit-watermark-raised-a-second", "", AGG, edit_entry(f"{C}/commits/12", lambda m: m.update(
        nextBatchWatermarkMs=m["nextBatchWatermarkMs"] + 1000), line=1), OK),
    Case("last-commit-watermark-lowered-without-input", "", AGG, edit_entry(f"{C}/commits/12", lambda m: m.update(
        nextBatchWatermarkMs=m["nextBatchWatermarkMs"] - 3_600_000), line=1), OK),
    Case("last-commit-watermark-zero-without-input", "", "dedup_watermark", edit_entry(
        f"{C}/commits/7", lambda m: m.update(nextBatchWatermarkMs=0), line=1), OK),
    Case("last-commit-watermark-raised-in-a-deduplication", "", "dedup_watermark", edit_entry(
        f"{C}/commits/7", lambda m: m.update(nextBatchWatermarkMs=m["nextBatchWatermarkMs"] + 3_600_000), line=1), OK),
    Case("last-watermarks-raised-in-processing-time", "", TTL, both(
        edit_entry(f"{C}/offsets/6", lambda m: m.update(batchWatermarkMs=m["batchWatermarkMs"] + 3_600_000), line=1),
        edit_entry(f"{C}/commits/6", lambda m: m.update(nextBatchWatermarkMs=m["nextBatchWatermarkMs"] - 3_600_000),
                   line=1)), OK),
    # Spark reads its text logs with Java's BufferedReader.readLine: a lone \r ends a line as \n and \r\n do
    Case("old-mac-line-ends-offsets", "", AGG, line_ends_are(f"{C}/offsets/12", end=b"\r"), OK),
    Case("old-mac-line-ends-commit", "", AGG, line_ends_are(f"{C}/commits/12", end=b"\r"), OK),
    Case("old-mac-line-ends-source-log", "", AGG, line_ends_are(f"{C}/sources/0/9.compact", end=b"\r"), OK),
    Case("old-mac-line-ends-sink-log", "", AGG, line_ends_are("output/_spark_metadata/12", end=b"\r"), OK),
    Case("windows-line-ends-everywhere", "", AGG, line_ends_are(
        f"{C}/metadata", *(f"{C}/{log}/{n}" for log in ("offsets", "commits") for n in range(13)),
        *(f"{C}/sources/0/{n}" for n in range(9)), f"{C}/sources/0/9.compact", f"{C}/state/0/_metadata/metadata",
        *(f"output/_spark_metadata/{n}" for n in (*range(9), "9.compact", 10, 11, 12)), end=b"\r\n"), OK),
    # json4s takes a JSON number with a fraction or an exponent for a long
    Case("json-float-watermark", "", AGG, lambda r: edit(r, f"{C}/offsets/12", '"batchWatermarkMs":1704067285000',
                                                          '"batchWatermarkMs":1.704067285E12'), OK),
    Case("json-float-commit-watermark", "", AGG, lambda r: edit(r, f"{C}/commits/12", "1704067285000", "1704067285000.0"), OK),
    # json4s reads a null as the field's default (0); a committed batch's own watermark is not the next one's
    Case("json-null-watermarks", "", AGG, both(
        edit_entry(f"{C}/offsets/12", lambda m: m.update(batchWatermarkMs=None, batchTimestampMs=None), line=1),
        edit_entry(f"{C}/commits/12", lambda m: m.update(nextBatchWatermarkMs=None), line=1)), OK),
    # an integer beyond a long is json4s's BigInt.longValue (its low 64 bits): far in the future here, which no
    # operator of a processing-time transformWithState drops or evicts by
    Case("json-huge-watermarks-in-processing-time", "", TTL, lambda r: [hand_json(
        r / C / log / "6", lambda t: re.sub(r'(WatermarkMs":)-?\d+', r"\g<1>99999999999999999999", t)) for log in ("offsets", "commits")], OK),
    Case("sink-log-entry-action-null-or-upper-case", "", AGG, both(
        edit_entry(SINK_LOG_12, lambda e: e.update(action=None)), edit_entry(SINK_LOG_12, lambda e: e.update(
            action="ADD"), line=-2)), OK),
    # a log file the newest compact file compacts, its entry's path damaged: the readers read the compact file only
    Case("sink-log-compacted-entry-path-damaged", "", "session_window_p3", edit_entry(
        "output/_spark_metadata/0", lambda e: e.update(path=e["path"].replace("/output/", "/outpu7/"))), OK),
    # a Hadoop sidecar whose header Hadoop cannot read is ignored: the zip is read unchecked
    Case("rocksdb-zip-sidecar-emptied", "", ROCKS, lambda r: (r / C / "state/0/0/.12.zip.crc").write_bytes(b""), OK),
    # the last batch's processing time raised a day in a checkpoint whose files keep their times: later than the
    # batch's own commit was written, so not the time it ran with (its timers and TTL are not judged by it)
    Case("last-batch-timestamp-raised-a-day-past-its-commit", "", TTL, both(
        lambda r: [os.utime(r / C / f"commits/{n}", (stamp(r, n) / 1000 + 2,) * 2) for n in (5, 6)],
        edit_entry(f"{C}/offsets/6", lambda m: m.update(batchTimestampMs=m["batchTimestampMs"] + 86_400_000), line=1)),
         OK),
    # a copy of an operator's directory past the query's operators (numbered from 0 without gaps): never read
    Case("operator-state-copied-past-the-query-s", "", AGG, lambda r: shutil.copytree(r / C / "state/0", r / C / "state/7"),
         OK),
    Case("last-offsets-watermark-removed", "", AGG, edit_entry(f"{C}/offsets/12", lambda m: m.pop("batchWatermarkMs"),
                                                              line=1), OK),
    Case("last-offsets-watermark-negative", "", AGG, edit_entry(f"{C}/offsets/12", lambda m: m.update(
        batchWatermarkMs=-1), line=1), OK),
    Case("rocksdb-snapshot-zero-padded-ahead", "", ROCKS,
         lambda r: shutil.copy2(r / C / "state/0/0/12.zip", r / C / "state/0/0/015.zip"), OK, rounds=2),
    Case("rocksdb-changelog-named-by-hand", "", ROCKS,
         lambda r: shutil.copy2(r / C / "state/0/0/13.changelog", r / C / "state/0/0/backup.changelog"), OK, rounds=2),
    # full copies the next load does not start from are never read again; a snapshot Spark wrote agrees with its deltas
    Case("rocksdb-older-zip-over-one-not-loaded", "", ROCKS, state_file_of("0/8.zip", "0/10.zip"), OK),
    Case("hdfs-snapshot-beside-its-deltas", "", "state_types", lambda r: None, OK),
    Case("rocksdb-zip-a-directory", "", ROCKS, entry_made_a_directory("state/0/0/12.zip"), OK),  # falls back to 10.zip
    # Spark's readers decompress as the record loop asks: nothing after the end marker's block, frame or chunk is read
    Case("state-delta-end-block-zeroed", "", AGG, tail_replaced("state/0/0/13.delta", bytes(21), 21), OK),  # lz4
    Case("state-delta-bytes-after-its-end", "", "state_types", both(  # zstd, loaded from the deltas
        lambda r: unlink(r, f"{C}/state/0/0/13.snapshot", f"{C}/state/0/0/.13.snapshot.crc"),
        tail_replaced("state/0/0/13.delta", b"\x00garbage")), OK),
    Case("rocksdb-changelog-bytes-after-its-end", "", "state_types_rocksdb",
         tail_replaced("state/0/0/13.changelog", b"\x00garbage"), OK),  # snappy
    # a later full copy Spark fails to read: the load that lists it skips it (automatic snapshot repair)
    Case("state-snapshot-ahead-unreadable", "", AGG, lambda r: (r / C / "state/0/0/14.snapshot").write_bytes(b""), OK,
         rounds=2),
    Case("rocksdb-zip-ahead-unreadable", "", ROCKS, lambda r: (r / C / "state/0/0/14.zip").write_bytes(b""), OK,
         rounds=2),
    Case("hdfs-delta-named-by-hand", "", AGG, lambda r: shutil.copy2(r / C / "state/0/0/13.delta", r / C / "state/0/0/old.delta"),
         OK, rounds=2),
    # json4s ignores unknown fields and takes a JSON number with a fraction for an int or a long, in every JSON file
    Case("operator-metadata-floats-and-extra-fields", "", AGG, lambda r: edit(
        r, f"{C}/state/0/_metadata/metadata", '{"operatorInfo":{"operatorId":0,', '{"x":[1],"operatorInfo":{"operatorId":0.0,'), OK),
    Case("operator-metadata-v2-extra-properties", "", TTL, both(
        lambda r: edit(r, f"{C}/state/0/_metadata/v2/3", '"numPartitions":2,', '"numPartitions":2.0,"x":{},'),
        lambda r: edit(r, f"{C}/state/0/_metadata/v2/3", r'{\"timeMode\"', r'{ \"x\" : [1], \"timeMode\"')), OK),
    Case("checksum-files-floats-and-extra-fields", "", V2, lambda r: [
        hand_json(p, lambda t: re.sub(r'"mainFileSize":(\d+)', r'"mainFileSize":\1.0', t).replace('{"algorithm"', '{"x":{},"algorithm"'))
        for p in (r / C / "state/0/0").glob("[0-9]*.crc")], OK),
    Case("rocksdb-zip-metadata-floats-and-extra-fields", "", ROCKS, lambda r: zip_metadata_edited(
        r / C / "state/0/0/12.zip", lambda t: re.sub(r'"sizeBytes":(\d+)', r'"sizeBytes":\1.0', t).replace(
            '"numKeys":4', '"x":[1],"numKeys":4.0')), OK),  # its Hadoop sidecar removed (Spark verifies zips' sidecars)
    # DataType.fromJson: the first JSON value; a field without nullable (nullable) or metadata, keys in any order
    Case("state-schema-json-as-spark-reads-it", "", AGG, lambda r: schema_json_edited(
        r / C / AGG_SCHEMA, key=lambda t: t + " trailing", value=lambda t: t.replace(
            '{"name":"count","type":"long","nullable":true,"metadata":{}}', '{"type":"long","name":"count"}', 1)), OK),
    Case("sink-log-path-file-colon", "", AGG, edit_entry(SINK_LOG_12, lambda e: e.update(
        path=e["path"].replace("file:///", "file:/").replace("/output/", "//output/./"))), OK),  # readers take the Path
    # a data file of 0 bytes holds no row: its readers read it twice to no effect (union_stall_min's batch 8 and 10)
    # a changelog the newest zip covers, replaced by the one before (its checksum sidecar left): never replayed, and
    # no evidence against the zip (check compared the zip with a replay through it: WM072)
    Case("rocksdb-changelog-below-the-zip-replaced-by-the-one-before", "", "state_types_rocksdb", lambda r: shutil.copy(
        r / C / "state/0/1/11.changelog", r / C / "state/0/1/12.changelog"), OK),
    # a data file the log records with no bytes has no split: Spark's readers never open it, gone or not
    Case("sink-empty-data-file-gone", "", STALL, lambda r: data_files_of(r, 8)[0].unlink(), OK),
    Case("sink-log-names-an-empty-file-twice", "", STALL, lambda r: shutil.copy2(
        r / "output/_spark_metadata/8", r / "output/_spark_metadata/10"), OK),
    # an older log batch's input read again: its rows are behind the watermark, dropped as late
    Case("source-log-older-file-of-the-batch-before", "", TWS, log_file_of(f"{C}/sources/0/4", f"{C}/sources/0/5"), OK),
    # a sink log file replaced by the one before, both naming a data file without rows: read twice, nothing doubles
    Case("sink-log-file-of-the-batch-before-naming-empty-files", "", TWS, log_file_of(
        "output/_spark_metadata/1", "output/_spark_metadata/2"), OK),
    Case("file-log-entries-extra-fields", "", AGG, both(
        edit_entry(SINK_LOG_12, lambda e: e.update(x={"y": []})), edit_entry(f"{C}/{SOURCE_COMPACT}", lambda e: e.update(x=[1]))), OK),
]


STATE_ROWS_35 = (r"StateSchemaNotCompatible: Provided schema doesn't match to the schema for existing state|"
                 r"InvalidUnsafeRowException: The streaming query failed by state format invalidation")
"""Spark 3.5's error for state of another layout than the query's: its schema check or, when a task reads a row
first, its row check (whichever task fails first; Spark 4.3 fails with its schema check every time)."""

MOVED_INPUT_35 = r"Wrong basePath .*/input for the root path: .*-before/input/run2-002\.json"

SPARK35 = {
    "empty-last-offsets": Spark35(FAILS, r"offsets/12\. Incomplete log file"),
    "gap-before-last-offsets": Spark35(FAILS, "batch 11 doesn't exist"),
    "gap-in-commits": Spark35(OK),
    "commit-without-offsets": Spark35(FAILS, r"\[CONCURRENT_STREAM_LOG_UPDATE\]"),
    "two-uncommitted-batches": Spark35(WRONG),
    "commit-v2-under-format-1": Spark35(FAILS, "UnsupportedLogVersion: maximum supported log version is v1, but encountered v2"),
    "metadata-removed": Spark35(OK, fix=True),  # Spark 3.5 writes a new metadata file (a new query id)
    "metadata-bad-id": Spark35(FAILS, "Invalid UUID string: not-a-uuid"),
    "orphaned-old-sidecar": Spark35(OK),
    "state-delta-missing": Spark35(FAILS, r"Error reading delta file .*/state/0/1/13\.delta"),
    "state-beyond-last-batch": Spark35(OK),
    "stale-hadoop-crc-offsets": Spark35(OK),
    "stale-hadoop-crc-delta": Spark35(OK),
    "sink-ahead": Spark35(WRONG),
    "sink-behind": Spark35(WRONG),
    "deleted-empty-last-offsets": Spark35(FAILS, r"Multiple streaming queries are concurrently using .*/offsets", fix=True),
    "missing-last-commit-kept-sidecar": Spark35(FAILS, r"Multiple streaming queries are concurrently using .*/commits",
                                                fix=True),
    "sink-log-gap": Spark35(FAILS, r"\[BATCH_METADATA_NOT_FOUND\] Unable to find batch .*/_spark_metadata/10"),
    "state-delta-replaced-by-the-version-before": Spark35(WRONG, fix=True),
    "sink-log-entry-size-a-string": Spark35(WRONG),
    "source-log-loses-its-last-batch": Spark35(WRONG),
    "last-offsets-watermark-raised": Spark35(WRONG),
    "checkpoint-removed": Spark35(WRONG),
    "temp-file": Spark35(OK),
    "watermark-lowered-at-the-last-batch": Spark35(OK),
    "commit-watermark-differs": Spark35(OK),
    "watermark-far-ahead": Spark35(WRONG, fix=True),
    "watermark-stuck-at-0": Spark35(OK),
    "conf-missing-from-last-offsets": Spark35(FAILS, STATE_ROWS_35),
    "row-checksums-turned-on-at-the-last-batch": Spark35(OK),  # Spark 3.5 does not restore the conf
    "state-partition-missing": Spark35(FAILS, r"Error reading delta file .*/state/0/2/1\.delta"),
    "extra-state-partition": Spark35(OK),
    "source-log-missing": Spark35(WRONG, fix=True),
    "interrupted-rewind": Spark35(WRONG, fix=True),
    "sink-moved": Spark35(WRONG, fix=True),
    "sink-copied": Spark35(WRONG),
    "unlisted-sink-file": Spark35(OK),
    "state-partition-read-only": Spark35(FAILS, r"state/0/1.*Read-only file system"),
    "state-delta-truncated": Spark35(FAILS, r"java\.io\.EOFException", fix=True),
    "state-snapshot-ahead": Spark35(WRONG),
    "offsets-blank-source-line": Spark35(FAILS, r"There are \[2\] sources in the checkpoint offsets"),
    "conf-changes-the-restart-does-not-use": Spark35(OK),
    "state-schema-of-another-query": Spark35(FAILS, STATE_ROWS_35, code="WM059"),  # no operator metadata
    "sink-data-file-missing": Spark35(WRONG),
    "file-source-offset-goes-back": Spark35(FAILS, "assertion failed"),
    "state-directory-emptied": Spark35(FAILS, r"Error reading delta file .*/state/0/\d/1\.delta"),
    "pending-offsets-of-another-source-kind": Spark35(FAILS, "No usable value for logOffset"),
    "old-offsets-cut": Spark35(OK),
    "sink-log-names-a-file-twice": Spark35(WRONG),
    "conf-value-refused-in-the-last-offsets": Spark35(
        FAILS, r"'5' in spark\.sql\.streaming\.join\.stateFormatVersion is invalid\. Valid versions are 1 and 2", fix=True),
    "conf-value-refused-of-a-conf-spark35-does-not-restore": Spark35(OK),  # Spark 3.5 ignores the conf
    "state-partition-restored-from-another": Spark35(WRONG),
    "state-schema-of-another-aggregation": Spark35(FAILS, STATE_ROWS_35),
    "sink-log-deletes-a-file": Spark35(WRONG),
    # no snapshot repair before Spark 4.1: the restart fails on the snapshot; removed, the older one is loaded
    "rocksdb-zip-zeroed": Spark35(FAILS, r"ChecksumException: Checksum error: .*/state/0/0/12\.zip", fix=True,
                                  fixed_by=lambda r: unlink(r, f"{C}/state/0/0/12.zip", f"{C}/state/0/0/.12.zip.crc")),
    "rocksdb-zip-truncated": Spark35(FAILS, r"ChecksumException: Checksum error: .*/state/0/1/12\.zip"),
    "rocksdb-sst-missing": Spark35(FAILS, r"FileNotFoundException: File .*/state/0/0/SSTs/.*\.sst does not exist",
                                   fix=True, fixed_by=lambda r: unlink(r, f"{C}/state/0/0/12.zip", f"{C}/state/0/0/.12.zip.crc")),
    "rocksdb-sst-data-block-flipped": Spark35(FAILS, r"ChecksumException: Checksum error: .*/state/0/0/SSTs/.*\.sst"),
    "rocksdb-sst-data-block-flipped-no-sidecar": Spark35(WRONG, fix=True),
    "rocksdb-sst-index-block-flipped-no-sidecar": Spark35(FAILS, r"RocksDBException: block checksum mismatch"),
    # tws_ttl's damage on agg_spark35, whose last batch reading input is batch 11 (log batch 9, the last entry of
    # sources/0/9.compact): the batch not committed, or the last one
    "pending-batch-input-deleted": Spark35(WRONG, fix=True, fixture=AGG35, breaks=both(
        stopped_after_11, crashed_before_commits(11), lambda r: last_logged_input(r).unlink()),
        fixed_by=lambda r: restore(str(last_logged_input(r).relative_to(r)))(r)),
    "pending-batch-input-moved": Spark35(FAILS, MOVED_INPUT_35, fix=True, fixture=AGG35, breaks=both(
        stopped_after_11, crashed_before_commits(11), lambda r: logs_name_input_at(r, r.parent / f"{r.name}-before"))),
    "last-batch-input-moved": Spark35(FAILS, MOVED_INPUT_35, fixture=AGG35, breaks=both(
        stopped_after_11, lambda r: logs_name_input_at(r, r.parent / f"{r.name}-before"))),
    "source-log-other-interval": Spark35(FAILS, r"sources/0/10 does not exist"),
    "input-without-new-data": Spark35(OK),
    "rocksdb-changelog-missing": Spark35(FAILS, r"Error reading streaming state file of .*/state/0/1/13\.changelog does not exist"),
    "rocksdb-changelog-truncated": Spark35(FAILS, r"java\.io\.EOFException"),
    "rocksdb-changelog-garbled": Spark35(FAILS, r"java\.io\.IOException: Stream is corrupted"),
    "rocksdb-partition-restored-from-another": Spark35(WRONG),
    "rocksdb-changelog-of-another-partition-without-rows": Spark35(WRONG, fix=True),
    "source-log-time-a-month-ahead": Spark35(WRONG, fix=True),
    "input-file-time-a-month-ahead": Spark35(WRONG, fix=True),
    "join-counts-of-the-version-before": Spark35(FAILS, r"NullPointerException: Cannot invoke .*ValueAndMatchPair\.value\(\)\" "
                                                 r"because \"valuePair\" is null", fix=True),
    "group-state-of-the-version-before": Spark35(WRONG, fix=True),
    # Spark 3.5 lists RocksDB snapshots too (loading a version without a zip of its own); HDFS snapshots it reads by
    # name, listing them only in its maintenance
    "rocksdb-snapshot-named-by-hand": Spark35(FAILS, r'NumberFormatException: For input string: "old"', fix=True),
    "rocksdb-snapshot-listed-as-the-version-loaded": Spark35(
        FAILS, r"FileNotFoundException: File .*/state/0/0/13\.zip does not exist", fix=True,
        fixed_by=lambda r: unlink(r, f"{C}/state/0/0/013.zip")),
    "partition-count-lowered-in-the-last-offsets": Spark35(WRONG, fix=True),
    "partition-count-raised-in-the-last-offsets": Spark35(FAILS, fix=True),
    "partition-count-one-in-the-last-offsets": Spark35(WRONG, fix=True),
    "provider-edited-in-every-offsets": Spark35(FAILS, fix=True),
    "rocksdb-provider-edited-in-every-offsets": Spark35(FAILS, fix=True),
    "aggregation-format-edited-in-every-offsets": Spark35(FAILS, fix=True),
    "gap-in-older-offsets": Spark35(OK),
    "hdfs-snapshot-zero-padded": Spark35(OK),
    "hdfs-snapshot-named-by-hand": Spark35(OK),
    "input-file-older-than-the-file-age": Spark35(WRONG, fix=True),
    "hdfs-delta-copied-to-snapshot": Spark35(WRONG, fix=True),
    "rocksdb-older-zip-over-the-newest": Spark35(WRONG, fix=True),
    # Spark 3.5 opens an HDFS snapshot by its name (a directory: none) and writes no operator metadata
    "hdfs-snapshot-a-directory": Spark35(OK),
    "hdfs-snapshot-an-empty-directory": Spark35(OK),
    "hdfs-delta-a-directory": Spark35(FAILS, r"Error reading delta file .*/state/0/1/13\.delta", fix=True),
    "operator-metadata-a-file": Spark35(OK, breaks=lambda r: (r / C / "state/0/_metadata").write_bytes(b"")),
    # no transformWithState in Spark 3.5: its chain with applyInPandasWithState calls withWatermark again after it
    "operators-after-applyinpandaswithstate": Spark35(OK, fixture="fmgws_then_agg_spark35", breaks=lambda r: None),
}


def findings(case: Case, root: Path, mounted: bool = False) -> list:
    """check's findings on a copy; ``mounted``: with the case's read-only directories mounted so (in a child)."""
    from wmcheck.checkpoint.validate import check_location

    sink = str(root / "output") if case.sink else None
    if not (mounted and case.read_only):
        return check_location(str(root / C), sink)
    code = ("import base64, pickle, sys; from wmcheck.checkpoint.validate import check_location; "
            "sys.stdout.write(base64.b64encode(pickle.dumps(check_location(sys.argv[1], sys.argv[2] or None))).decode())")
    command = read_only([sys.executable, "-c", code, str(root / C), sink or ""], [root / d for d in case.read_only])
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return pickle.loads(base64.b64decode(done.stdout))


def apply_fix(case: Case, before: list, root: Path) -> None:
    """Fix a broken copy: run the wmcheck command its finding's fix is, or carry out the instruction (``case.fix``)."""
    fix = finding_fix(before, case.code)
    if case.repair:
        assert fix is not None and not isinstance(fix, Instruction), (case.key, fix)
        run_printed(fix, str(root / C))
    else:
        assert case.fix is not None and isinstance(fix, Instruction), (case.key, fix)
        case.fix(root)
    if case.then is not None:
        case.then(root)


def run_oracle(cases: list[Case], base: Path, python: str = sys.executable,
               fixed: Callable[[Case], bool] = lambda c: c.fixed) -> tuple[dict, dict[str, Outcome], dict[str, Path]]:
    """Restart under ``base``, in one child process of ``python``: a reference per fixture and number of new files
    (``ref:FIXTURE:N``), each case's broken copy (``KEY:broken``), fixed copy when ``fixed(case)`` and remedied
    copy when it has a remedy. Returns the findings before the restarts by (key, stage) (stages: broken,
    before-fixed, fixed, before-remedied, remedied), the outcomes by restart key, and the copies by restart key."""
    restarts, found, mounts = {}, {}, []
    for fixture, extra, rounds in sorted({(c.fixture, c.extra_batches, c.rounds) for c in cases}):
        restarts[ref_key(fixture, extra, rounds)] = (fixture, prepare(fixture, base / f"ref-{fixture}-{extra}-{rounds}",
                                                                      extra, rounds))
    for case in cases:
        for variant in ("broken", *(["fixed"] if fixed(case) else []), *(["remedied"] if case.remedy else [])):
            root = prepare(case.fixture, base / f"{case.key}-{variant}", case.extra_batches, case.rounds)
            shutil.copytree(root, backup(root))
            case.breaks(root)
            stage = "broken" if variant == "broken" else f"before-{variant}"
            found[case.key, stage] = findings(case, root, mounted=True)
            if variant == "broken":
                mounts += [root / d for d in case.read_only]
            if variant == "fixed":
                apply_fix(case, found[case.key, stage], root)
            elif variant == "remedied":
                assert case.remedy is not None
                case.remedy(root)
            if variant != "broken":
                found[case.key, variant] = findings(case, root)
            restarts[f"{case.key}:{variant}"] = (case.fixture, root)
    return found, restart_all(restarts, python=python, read_only_dirs=mounts), {key: root for key, (_, root) in restarts.items()}


def ref_key(fixture: str, extra: int, rounds: int) -> str:
    """The restart key of the unbroken copy that a case with these new input files and rounds compares with."""
    return f"ref:{fixture}:{extra}" + (f":{rounds}" if rounds > 1 else "")


def reference(outcomes: dict[str, Outcome], case: Case) -> Outcome:
    """The restart of the unbroken copy: it ran new batches and its sink could be read back."""
    ref = outcomes[ref_key(case.fixture, case.extra_batches, case.rounds)]
    assert not ref.failed and ref.batches and ref.rows is not None, ref
    return ref
