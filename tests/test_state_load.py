"""Which state files Spark reads to load the next version, and what it does with damaged ones (Spark's load order and
snapshot repair, as tests/test_restart_oracle.py proves them on real restarts), on copies of real fixtures."""
from __future__ import annotations

import shutil

import pytest

from wmcheck.checkpoint.errors import MalformedFileError
from wmcheck.checkpoint.model import open_checkpoint, store_unique_ids
from wmcheck.statestore.formats.content import Decoding
from wmcheck.statestore.formats.load import Lineages, resolve, verify_loads
from wmcheck.statestore.formats.registry import FORMATS, version_file
from wmcheck.statestore.rocksdb.zips import read_snapshot_zip, sst_footer_ok, zip_entries

from conftest import FIXTURES

ZIP = FIXTURES / "agg_window_rocksdb" / "checkpoint" / "state" / "0" / "0" / "12.zip"


def loads(root, version=None, content=True):
    """Each store partition's load of the next version (or ``version``) as check resolves it: checkpoint format 2
    by lineage; its files decoded unless ``content`` is False."""
    ckpt = open_checkpoint(str(root))
    decoding = Decoding.of(ckpt.conf.get)
    lineages = Lineages(ckpt.fs, decoding.codec)
    todo = [resolve(p, ckpt.next_batch if version is None else version, store_unique_ids(ckpt, op, p), lineages)
            for op in ckpt.operators for p in op.live_partitions]
    sidecars = {f.path for f in ckpt.state_layout.crc_files}
    done = verify_loads(ckpt.fs, todo, decoding, lineages=lineages, sidecars=sidecars) if content else todo
    return {load.part.directory: load for load in done}


def test_the_registry_names_every_versioned_file():
    assert [(f.kind, f.provider, f.role, f.read_later) for f in FORMATS] == [
        ("snapshot", "hdfs", "base", True), ("delta", "hdfs", "increment", False),
        ("zip", "rocksdb", "base", True), ("changelog", "rocksdb", "increment", False)]
    fmt, version, uid = version_file("13_9b7b7248-b867-4b17-9676-2e2e76cddb65.changelog")
    assert (fmt.kind, version, uid) == ("changelog", 13, "9b7b7248-b867-4b17-9676-2e2e76cddb65")
    assert version_file("13.delta.crc") is None and version_file(".13.delta.crc") is None


def test_a_zip_is_read_from_the_front_as_spark_reads_it():
    data = ZIP.read_bytes()
    entries, meta = read_snapshot_zip(data, "12.zip")
    assert sorted(entries) == sorted(n for n in zip_entries(data, "z") if n != "metadata")
    assert [f.size for f in meta.sst_files] and all(f.dfs_name.endswith(".sst") for f in meta.sst_files)
    end = data.rindex(b"PK\x01\x02")  # the central directory: ZipInputStream never reads it
    assert read_snapshot_zip(data[:end], "12.zip")[1] == meta
    with pytest.raises(MalformedFileError, match="the file ends"):
        read_snapshot_zip(data[:end // 2], "12.zip")
    with pytest.raises(MalformedFileError, match="expected a metadata entry"):
        read_snapshot_zip(bytes(len(data)), "12.zip")


def test_sst_files_end_with_rocksdb_s_magic_number():
    ssts = list((ZIP.parent / "SSTs").glob("*.sst"))
    assert ssts and all(sst_footer_ok(p.read_bytes()) for p in ssts)
    assert not sst_footer_ok(bytes(64)) and not sst_footer_ok(b"")


def test_the_chain_is_the_newest_zip_and_every_changelog_after_it():
    load = loads(FIXTURES / "agg_window_rocksdb" / "checkpoint")["state/0/0"]
    assert [f.path.rsplit("/", 1)[1] for f in load.chain] == ["12.zip", "13.changelog"]
    assert load.loadable and not load.skipped and load.fallback is None


def test_a_damaged_zip_is_skipped_for_the_older_one_and_its_changelogs(tmp_path):
    root = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / "agg_window_rocksdb" / "checkpoint", root)
    (root / "state/0/0/12.zip").write_bytes(bytes(100))
    load = loads(root)["state/0/0"]
    assert load.loadable and load.fallback == 10
    assert [f.path.rsplit("/", 1)[1] for f in load.chain] == ["10.zip", "11.changelog", "12.changelog", "13.changelog"]
    assert [(d.path, d.version) for d in load.skipped] == [("state/0/0/12.zip", 12)]


def test_a_damaged_changelog_fails_the_load_with_its_byte(tmp_path):
    root = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / "agg_window_rocksdb" / "checkpoint", root)
    data = (root / "state/0/0/13.changelog").read_bytes()
    (root / "state/0/0/13.changelog").write_bytes(data[:30])
    load = loads(root)["state/0/0"]
    assert not load.loadable and load.failure is not None
    assert (load.failure.path, load.failure.byte, load.failure.version) == ("state/0/0/13.changelog", 21, 13)


def test_without_changelogs_a_damaged_zip_fails(tmp_path):
    """No automatic snapshot repair without changelog checkpointing (Spark needs the changelogs to rebuild)."""
    root = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / "dedup_rocksdb_p3" / "checkpoint", root)
    ckpt = open_checkpoint(str(root))
    zip_path = resolve(ckpt.operators[0].partitions[0], ckpt.next_batch).chain[0].path
    (root / zip_path).write_bytes(bytes(10))
    load = loads(root)[zip_path.rsplit("/", 1)[0]]
    assert load.failure is not None and load.failure.path == zip_path and not load.skipped


def test_check_reads_the_damaged_delta_check_no_content_and_show_do_not(tmp_path):
    """The newest delta of partition 2 cut to 20 bytes: Spark fails to load it (the restart oracle's
    state-delta-truncated); check says where, --no-content (and show, which gives its verdict) only names the
    checksum that no longer matches, and show says that it did not decode the files."""
    import json

    from conftest import run_cli

    root = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / "agg_window_hdfs" / "checkpoint", root)
    (root / "state/0/2/13.delta").write_bytes((root / "state/0/2/13.delta").read_bytes()[:20])
    doc = json.loads(run_cli("show", root, "--format", "json").stdout)
    shown = doc["operators"][0]
    assert (shown["next_version"], shown["next_version_loadable"], shown["unloadable"]) == (13, True, [])
    assert [(f["code"], f["path"]) for f in doc["findings"]] == [("WM030", "state/0/2/13.delta")]
    assert "(wmcheck check decodes them)" in run_cli("show", root).stdout.splitlines()[0]
    found = json.loads(run_cli("check", root, "--format", "json", exit_code=1).stdout)
    assert [(f["code"], f["path"]) for f in found] == [("WM039", "state/0/2/13.delta")]  # not WM030's "restarts fine"
    assert found[0]["message"].startswith("byte 0: expected a 21-byte LZ4Block header, the file ends: Spark fails to load "
                                          "state version 13 of state/0/2")
    assert (found[0]["fix"]["kind"], found[0]["fix"]["request"]) == ("rewind", {"to_batch": 11})
    found = json.loads(run_cli("check", root, "--no-content", "--format", "json").stdout)
    assert [f["code"] for f in found] == ["WM030"]


V2 = FIXTURES / "checkpoint_v2" / "checkpoint"
V2_IDS = {10: "d3d11077-8391-4faa-93aa-b98446db88d5", 11: "919e8e3b-955d-4321-b471-32e55e745d94",
          12: "a6ef36aa-ff8f-440b-9a05-481416f9e91e", 13: "9b7b7248-b867-4b17-9676-2e2e76cddb65"}
"""state/0/0 of checkpoint_v2: 13's changelog records the lineage [12], 12's [10, 11]; 10 and 12 have snapshots."""


def names(load):
    return [f.path.rsplit("/", 1)[1] for f in load.chain]


def v2_copy(tmp_path):
    root = tmp_path / "checkpoint"
    shutil.copytree(V2, root)
    return root


def name(version, kind):
    return f"{version}_{V2_IDS[version]}.{kind}"


@pytest.mark.parametrize("content", [True, False])
def test_checkpoint_v2_loads_what_the_version_s_lineage_names(content):
    """Version 13's changelog records its lineage back to the snapshot of version 12: Spark loads 12's zip and
    replays 13's changelog (RocksDB.loadWithCheckpointId), by names alone or with the contents decoded."""
    load = loads(V2, content=content)["state/0/0"]
    assert names(load) == [name(12, "zip"), name(13, "changelog")] and load.loadable
    assert load.lineage == ((12, V2_IDS[12]), (13, V2_IDS[13]))


def edit_commit(root, batch, old, new):
    path = root / "commits" / str(batch)
    path.write_text(path.read_text().replace(old, new))
    (root / "commits" / f".{batch}.crc").unlink()


def test_a_commit_naming_another_id_than_the_lineage_is_not_what_spark_reads(tmp_path):
    """commits/11 names another unique id for version 12 (a file that does not exist): Spark still loads version 13
    from the lineage its changelog records (tests/test_restart_oracle.py v2-commit-and-lineage-disagree: the restart
    gives the control run's output); check says WM020 (that id has no file), not WM016."""
    import json

    from conftest import run_cli

    root = v2_copy(tmp_path)
    edit_commit(root, 11, V2_IDS[12], "00000000-0000-4000-8000-000000000012")
    load = loads(root)["state/0/0"]
    assert names(load) == [name(12, "zip"), name(13, "changelog")] and load.loadable
    found = json.loads(run_cli("check", root, "--format", "json").stdout)
    assert [(f["code"], f["path"]) for f in found] == [("WM020", "state/0/0")]
    assert json.loads(run_cli("show", root, "--format", "json").stdout)["operators"][0]["next_version_loadable"]


def test_the_snapshot_the_lineage_names_is_read_not_the_commit_s(tmp_path):
    """commits/11 names for version 12 a garbled snapshot: Spark never reads it (the lineage names 12's own), so
    nothing is skipped and nothing fails."""
    root = v2_copy(tmp_path)
    other = "00000000-0000-4000-8000-000000000012"
    edit_commit(root, 11, V2_IDS[12], other)
    (root / "state/0/0" / f"12_{other}.zip").write_bytes(bytes(500))
    load = loads(root)["state/0/0"]
    assert names(load) == [name(12, "zip"), name(13, "changelog")] and load.loadable and not load.skipped


def test_without_the_lineage_s_snapshot_repair_follows_older_lineages(tmp_path):
    """12's zip removed: 13's lineage names no snapshot and does not reach version 1, so the first attempt (the empty
    state) fails and Spark 4.3's snapshot repair follows the lineages of older changelogs (getFullLineage) to 10's
    zip, then replays 11, 12 and 13 (tests/test_restart_oracle.py v2-lineage-snapshot-missing: the restart gives the
    control run's output)."""
    root = v2_copy(tmp_path)
    (root / "state/0/0" / name(12, "zip")).unlink()
    for content in (False, True):
        load = loads(root, content=content)["state/0/0"]
        assert names(load) == [name(10, "zip"), name(11, "changelog"), name(12, "changelog"), name(13, "changelog")]
        assert load.loadable and load.fallback == 10 and not load.skipped


def test_a_changelog_the_lineage_needs_is_missing(tmp_path):
    """Without 12's zip and 11's changelog: the repaired load starts at 10's zip and needs 11's changelog (WM016)."""
    root = v2_copy(tmp_path)
    (root / "state/0/0" / name(12, "zip")).unlink()
    (root / "state/0/0" / name(11, "changelog")).unlink()
    load = loads(root, content=False)["state/0/0"]
    assert (load.missing, load.missing_id) == (11, V2_IDS[11])


def test_a_head_changelog_whose_lineage_cannot_be_read_fails_the_load(tmp_path):
    root = v2_copy(tmp_path)
    head = root / "state/0/0" / name(13, "changelog")
    head.write_bytes(head.read_bytes()[:15])
    load = loads(root)["state/0/0"]
    assert not load.loadable and load.failure is not None and load.failure.path == f"state/0/0/{name(13, 'changelog')}"


SSTS = sorted(FIXTURES.glob("*/checkpoint/state/**/SSTs/*.sst"))


def test_every_fixture_sst_file_reads_block_by_block():
    """Every block of every SST file of the fixtures matches its checksum (XXH3, RocksDB's default)."""
    from wmcheck.statestore.rocksdb.sst import sst_damage

    assert len(SSTS) > 100 and all(sst_damage(p.read_bytes()) is None for p in SSTS)


def test_index_blocks_read_at_once_give_the_handles_read_entry_by_entry():
    """The data block handles of every fixture SST's index block, read with NumPy (every entry a restart point),
    are those of the entry-by-entry reader; an index with fewer restart points is read entry by entry."""
    from wmcheck.statestore.rocksdb import sst

    checked = 0
    for path in SSTS:
        table = sst.TableFile(path.read_bytes())
        meta, _ = table.block(table.meta[0], table.meta[1], "metaindex block")
        blocks = {name: table.block(*sst._handle(value), name.decode())[0] for name, value in sst._entries(meta, False)}
        props = dict(sst._entries(blocks[b"rocksdb.properties"], False))
        plain = sst.inflate(*table.block(table.index[0], table.index[1], "index block"))
        assert plain is not None
        delta = sst.property_value(props, "rocksdb.index.value.is.delta.encoded") == 1
        handles = sst._block_handles(plain, delta)
        assert handles == [sst._handle(v) for _, v in sst._entries(plain, delta)]
        checked += 1
    assert checked == len(SSTS) > 100

    def varint(n: int) -> bytes:
        return bytes([(n >> s & 0x7F) | (0x80 if n >> s + 7 else 0) for s in range(0, max(n.bit_length(), 1), 7)])

    handles = [(0, 4013), (4018, 300), (4323, 127), (10 ** 7, 2 ** 20), (2 ** 35, 1)]
    for delta in (True, False):
        body, starts = b"", []
        for i, (offset, size) in enumerate(handles):
            starts.append(len(body))
            handle, key = varint(offset) + varint(size), f"key-{i}".encode()
            body += varint(0) + varint(len(key)) + (b"" if delta else varint(len(handle))) + key + handle
        index = body + b"".join(s.to_bytes(4, "little") for s in starts) + len(starts).to_bytes(4, "little")
        assert sst._block_handles(index, delta) == [sst._handle(v) for _, v in sst._entries(index, delta)] == handles
    # two entries, one restart point (an index_block_restart_interval of 2): (0, 100) and (105, 50)
    two = bytes([0, 1]) + b"a" + bytes([0, 100]) + bytes([1, 1]) + b"b" + bytes([105, 50]) + (0).to_bytes(4, "little") + (1).to_bytes(4, "little")
    assert sst._block_handles(two, True) == [(0, 100), (105, 50)]


@pytest.mark.parametrize("block", ["data", "index"])
@pytest.mark.parametrize("sidecar", [True, False])
def test_a_flipped_sst_block_is_found_where_spark_or_rocksdb_reads_it(tmp_path, block, sidecar):
    """A byte flipped in an SST file that 12.zip names: with its Hadoop sidecar, Spark's copy of the file fails its
    checksum and the zip is skipped (WM040, tests/test_restart_oracle.py rocksdb-sst-data-block-flipped); without
    (an object store), RocksDB fails to open the snapshot on a damaged index block (skipped: WM040), and opens it
    on a damaged data block, whose rows every scan then misses (WM048, rocksdb-sst-data-block-flipped-no-sidecar).
    The python engine refuses all of them (RocksDB's iterators stop at a damaged block without an error, so it
    verifies the blocks first)."""
    from wmcheck.statestore.rocksdb.sst import sst_damage

    from conftest import run_cli
    from oracle_cases import C, index_offset, sst_block_flipped

    root = tmp_path / "copy"
    shutil.copytree(FIXTURES / "agg_window_rocksdb" / "checkpoint", root / C)
    sst_block_flipped("state/0/0/12.zip", block, sidecar)(root)
    load = loads(root / C)["state/0/0"]
    silent = block == "data" and not sidecar
    bad = load.failure if silent else load.skipped[0]
    data = (root / C / bad.path).read_bytes()
    found = sst_damage(data)
    assert found is not None and (found.at_open, found.byte) == (block == "index", 0 if block == "data" else index_offset(data))
    assert (bad.on_read, bad.version) == (silent, 12)
    assert bad.byte == (None if sidecar else found.byte) and ("sidecar says" in bad.problem) == sidecar
    assert load.loadable != silent and (load.fallback == 10) != silent
    failed = run_cli("state", root / C, exit_code=2).stderr
    assert f"{bad.path}: byte {found.byte}: the {block} block" in failed and "does not match its XXH3 checksum" in failed


@pytest.mark.parametrize("name", ["agg_window_rocksdb", "dedup_rocksdb_p3"])
def test_check_hashes_each_block_of_a_table_file_once(monkeypatch, name):
    """check reads a snapshot's table file once and verifies it once: what Spark's load finds (WM039), its first
    puts (WM058's sample) and its keys against the watermark (WM062) are read from the blocks it verified, none of
    them hashed again."""
    import zlib
    from collections import Counter

    from wmcheck.statestore.keys import partitions as key_partitions
    from wmcheck.statestore.keys import stale_columns
    from wmcheck.statestore.rocksdb import sst as rocksdb_sst

    from conftest import run_cli

    hashed: Counter = Counter()
    read: Counter = Counter()
    block = rocksdb_sst.TableFile.block

    def counted(self, offset, size, what):
        hashed[zlib.crc32(self.data), offset] += 1
        return block(self, offset, size, what)

    def reading(name, function):
        def wrapper(table, *args, **kwargs):
            read[name, zlib.crc32(getattr(table, "data", table))] += 1  # bytes before tables were verified once
            return function(table, *args, **kwargs)
        return wrapper

    import wmcheck.statestore.formats.content as content

    monkeypatch.setattr(content, "COLUMNAR_BYTES", 0)  # the columns judge the fixture's small tables too
    monkeypatch.setattr(rocksdb_sst.TableFile, "block", counted)
    monkeypatch.setattr(key_partitions, "table_puts", reading("sample", key_partitions.table_puts))
    monkeypatch.setattr(stale_columns, "table_changes", reading("judge", stale_columns.table_changes))
    run_cli("check", FIXTURES / name / "checkpoint", "--format", "json")
    files = {crc for crc, _ in hashed}
    assert files and {crc for _, crc in read} == files and set(hashed.values()) == {1}
    assert {what for what, _ in read} == ({"sample", "judge"} if name == "agg_window_rocksdb" else {"sample"})


def sized_file(records: list[tuple[bytes, bytes | None]]) -> bytes:
    """A zstd-compressed delta or snapshot of ``(key, value or None for a delete)`` records, Spark's end mark last."""
    import struct

    import zstandard

    out = b"".join(struct.pack(">i", len(k)) + k + (struct.pack(">i", -1) if v is None else struct.pack(">i", len(v)) + v)
                   for k, v in records)
    return zstandard.ZstdCompressor().compress(out + struct.pack(">i", -1))


@pytest.mark.parametrize("columnar_bytes", [0, 1 << 40], ids=["at-once", "record-by-record"])
def test_both_ways_of_reading_a_file_s_records_judge_alike(monkeypatch, columnar_bytes):
    import wmcheck.statestore.formats.content as content
    from wmcheck.statestore.formats.registry import BY_KIND
    from wmcheck.statestore.formats.row_checksums import RowPlace
    from wmcheck.statestore.formats.sized_columns import file_records

    monkeypatch.setattr(content, "COLUMNAR_BYTES", columnar_bytes)
    read = []
    monkeypatch.setattr(content, "file_records", lambda data: read.append(file_records(data)) or read[-1])
    place = RowPlace(0, "default", 0, 3, "state/0/0/3.snapshot")
    rows = [(b"key %04d" % i, b"value %010d" % i) for i in range(64)]  # UnsafeRow sizes: multiples of 8
    with_delete = sized_file(rows[:10] + [(b"gone key", None)] + rows[10:])
    decoding = Decoding("zstd", False)
    for kind in ("snapshot", "delta"):
        assert content.damage(sized_file(rows), BY_KIND[kind], decoding, f"state/0/0/3.{kind}", place) is None
    assert content.damage(with_delete, BY_KIND["delta"], decoding, "state/0/0/3.delta", place) is None
    found = content.damage(with_delete, BY_KIND["snapshot"], decoding, "state/0/0/3.snapshot", place)
    assert (found.path, found.problem) == ("state/0/0/3.snapshot", "expected a value size, found -1 (a snapshot holds no "
                                           "deletes; Spark: CANNOT_READ_SNAPSHOT_FILE_VALUE_SIZE)")
    assert [found is not None for found in read] == ([True] * 4 if columnar_bytes == 0 else [])
