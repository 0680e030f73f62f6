"""``wmcheck state`` (python engine) on a RocksDB snapshot whose table files are damaged: one line naming the table
file as the checkpoint holds it (never the temporary folder the snapshot is rebuilt in), what Spark's load expects
of it, and where to go next, exit 2; in every output form, with workers and without."""
from __future__ import annotations

import io
import json
import shutil
import zipfile

import pytest

from wmcheck.checkpoint.errors import MalformedFileError
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.statestore.formats.load import resolve
from wmcheck.statestore.rocksdb.files import open_snapshot
from wmcheck.statestore.rocksdb.zips import zip_entries

from conftest import fixture_checkpoint, run_cli

NAME = "dedup_rocksdb_p3"
SST = "state/0/0/SSTs/000008-6c4e97c9-105c-4ea0-9632-ce9c363785a7.sst"
"""The one table file of partition 0's newest snapshot, 4.zip (1261 bytes, its first data block 70 bytes at 0)."""
ZIP = "state/0/0/4.zip"
GHOST = "state/0/0/SSTs/000008-00000000-0000-0000-0000-000000000000.sst"
HINT = "wmcheck check CKPT names the batch to rewind to, or restore the file from a backup"
SIZE = "(CANNOT_LOAD_STATE_STORE.UNEXPECTED_FILE_SIZE)"
MISSING = "missing: 4.zip names it (Spark: FileNotFoundException while copying the snapshot's files)"


def rewrite_zip(root, path, change) -> None:
    """The snapshot zip ``path`` written again with each entry's bytes passed through ``change(name, data)``."""
    entries = zip_entries((root / path).read_bytes(), path)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, change(name, data))
    (root / path).write_bytes(out.getvalue())


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]


def damage(root, kind: str) -> None:
    sst = root / SST
    data = sst.read_bytes()
    if kind == "emptied":
        sst.write_bytes(b"")
    elif kind == "truncated":
        sst.write_bytes(data[:630])
    elif kind == "flipped":
        sst.write_bytes(_flip(data, 10))
    elif kind == "footer":
        sst.write_bytes(_flip(data, len(data) - 1))
    elif kind == "deleted":
        sst.unlink()
    else:  # the zip names a table file that is not there (its stale sidecar removed: Spark unzips it through Hadoop's
        ghost = GHOST.rsplit("/", 1)[1].encode()  # checksummed file system, which would fail on that first)
        rewrite_zip(root, ZIP, lambda name, d: d.replace(SST.rsplit("/", 1)[1].encode(), ghost) if name == "metadata" else d)
        (root / ZIP).with_name(".4.zip.crc").unlink()


EXPECTED = {
    "emptied": (SST, f"0 bytes, but 4.zip records 1261 {SIZE}"),
    "truncated": (SST, f"630 bytes, but 4.zip records 1261 {SIZE}"),
    "flipped": (f"{SST}: byte 0", "the data block (70 bytes) does not match its XXH3 checksum (RocksDB: Corruption: "
                                  "block checksum mismatch)"),
    "footer": (f"{SST}: byte 1253", "expected a RocksDB table's magic number in the last 8 bytes (RocksDB opening the "
                                    "snapshot: Corruption: Bad table magic number)"),
    "deleted": (SST, MISSING),
    "zip-names-missing": (GHOST, MISSING),
}
FORMS = {
    "table": ["--format", "table"],
    "json": ["--format", "json"],
    "csv": ["--format", "csv"],
    "rows-table": ["--older-than-watermark"],
    "rows-json": ["--older-than-watermark", "--format", "json"],
    "rows-csv": ["--older-than-watermark", "--format", "csv"],
    "rows-parquet": ["--older-than-watermark", "--format", "parquet", "--output", "{out}"],
    "one-job": ["--jobs", "1", "--format", "csv"],
}


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    """A copy of the fixture's checkpoint per damage kind."""
    top = tmp_path_factory.mktemp("sst-damage")
    for kind in EXPECTED:
        shutil.copytree(fixture_checkpoint(NAME), top / kind)
        damage(top / kind, kind)
    return top


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("kind", EXPECTED)
def test_a_damaged_table_file_is_one_line_naming_it(damaged, tmp_path, kind, form):
    where, what = EXPECTED[kind]
    args = [a.format(out=tmp_path / "rows.parquet") for a in FORMS[form]]
    result = run_cli("state", damaged / kind, "--engine", "python", *args, exit_code=2)
    if "json" in form:
        assert json.loads(result.stdout) == {"error": what, "hint": HINT, "param": None, "where": where, "exit_code": 2}
    else:
        assert (result.stdout, result.stderr) == ("", f"Error: {where}: {what} (hint: {HINT})\n")
    assert not (tmp_path / "rows.parquet").exists()


def test_auto_reads_with_the_python_engine_and_fails_the_same(damaged):
    result = run_cli("state", damaged / "emptied", exit_code=2)
    assert result.stderr == f"Error: {SST}: 0 bytes, but 4.zip records 1261 {SIZE} (hint: {HINT})\n"


def test_check_names_the_same_file_and_the_batch_the_hint_promises(damaged):
    """What the hint sends the reader to: check names the same file and the rewind (to batch 1: 3.zip names the
    same table file; only 4.zip names the missing one)."""
    for kind in EXPECTED:
        found = json.loads(run_cli("check", damaged / kind, "--format", "json", exit_code=1).stdout)
        wm039 = [(f["path"], f["fix"]["request"]) for f in found if f["code"] == "WM039"]
        assert wm039 == [(EXPECTED[kind][0].split(":")[0], {"to_batch": 2 if kind == "zip-names-missing" else 1})]


def test_rocksdb_s_refusal_names_the_snapshot_s_files_not_the_folder_it_is_rebuilt_in(tmp_path):
    """Read through RocksDB (a table read there only), a zip whose metadata gives the table file another local name
    than RocksDB's MANIFEST: RocksDB's error names the files as the checkpoint holds them, in one line."""
    root = tmp_path / "checkpoint"
    shutil.copytree(fixture_checkpoint(NAME), root)
    rewrite_zip(root, ZIP, lambda name, d: d.replace(b'"000008.sst"', b'"000009.sst"') if name == "metadata" else d)
    ckpt = open_checkpoint(str(root))
    part = ckpt.operators[0].partitions[0]
    with pytest.raises(MalformedFileError) as failed:
        with open_snapshot(ckpt.fs, resolve(part, 4).chain[0], part.directory, tables=False):
            pass
    assert str(failed.value) == (
        f"{ZIP}: RocksDB cannot open the snapshot: Corruption: Corruption: IO error: No such file or directory: While "
        "open a file for random read: 000008.sst: No such file or directory The file MANIFEST-000005 may be corrupted. "
        f"(hint: {HINT})")
