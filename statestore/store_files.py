"""One store partition's key/value bytes at a state version, from its files (HDFS or RocksDB provider).

The files come from :meth:`StorePartition.restore_plan`: the newest full copy at or before the
version (HDFS ``V.snapshot``, RocksDB ``V.zip``) then every increment after it (``V.delta``,
``V.changelog``), by unique id for checkpoint format v2. Keys and values stay encoded here, without
the row checksums of ``rowChecksum.enabled``, each verified as Spark's reader does (:mod:`.row_checksums`).
"""
from __future__ import annotations

from wmcheck.checkpoint.errors import MissingFileError
from wmcheck.checkpoint.fs import FileSystem
from wmcheck.checkpoint.row_checksums import RowPlace, verified_key, verified_value, verified_values
from wmcheck.checkpoint.state_codecs import decompress
from wmcheck.checkpoint.state_files import StorePartition
from wmcheck.checkpoint.state_records import DELETE, sized_records

from .rocksdb_files import ZipMetadata, apply_changelog, read_zip


def load_partition(fs: FileSystem, part: StorePartition, version: int, codec: str,
                   unique_ids: dict[int, str] | None = None,
                   checksums: bool = False) -> tuple[dict[bytes, bytes], ZipMetadata | None]:
    """The encoded state of ``part`` at ``version`` and, for RocksDB, the snapshot's metadata
    (``checksums``: the files were written with row checksums)."""
    chain, missing = part.restore_plan(version, unique_ids)
    if missing is not None:
        raise MissingFileError(f"state version {version} cannot be rebuilt: version {missing} has neither a snapshot nor "
                               "an increment", path=part.directory, hint="wmcheck check CKPT explains which files are missing")
    state: dict[bytes, bytes] = {}
    meta: ZipMetadata | None = None
    rest = chain
    if chain and chain[0].format.decoder == "rocksdb-zip":
        state, meta = read_zip(fs, chain[0], part.directory)
        rest = chain[1:]
    contents = fs.read_many(f.path for f in rest)
    rocksdb = part.provider == "rocksdb"
    for f in rest:
        if f.format.decoder == "rocksdb-changelog":
            apply_changelog(state, contents[f.path], codec, f.path)
            continue
        place = RowPlace(part.operator_id, part.store, part.partition, f.version, f.path)
        for kind, key, value in sized_records(decompress(contents[f.path], codec, f.path), f.path):
            if kind == DELETE:
                state.pop(verified_key(key, place) if checksums else key, None)
            elif value is not None:
                state[key] = verified_value(key, value, place) if checksums else value
    if checksums and rocksdb:
        place = RowPlace(part.operator_id, part.store, part.partition, version, chain[-1].path if chain else part.directory)
        state = {k: verified_values(k, v, place) for k, v in state.items()}
    return state, meta
