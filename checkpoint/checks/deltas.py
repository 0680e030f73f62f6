"""The check that every HDFS state delta the next batch loads deletes only keys the version before it holds.

The HDFS-backed store writes a delete record only for a key it removed (``HDFSBackedStateStore.remove``: when the
map held a value for it), so replaying the files of a load in order, each delete finds its key. One that does not
shows a delta that is not the one Spark wrote for its version (an older delta of the partition copied over it,
another partition's): Spark loads it without an error, and the changes the real delta held are lost, which the
output may or may not need (a warning: the rewind runs the batch again). Judged for the operator that writes to the
sink: the lost changes of one feeding another come out, or not, as the other's watermark lets them (a chained
aggregation's older delta over the next one: the control run's output, tested).
"""
from __future__ import annotations

from typing import Iterator, Sequence

from wmcheck.statestore.formats.codecs import decompress
from wmcheck.statestore.formats.content import Decoding
from wmcheck.statestore.formats.files import StateFile
from wmcheck.statestore.formats.load import StoreLoad
from wmcheck.statestore.formats.records import DELETE, sized_records
from wmcheck.statestore.formats.registry import RECORDS, file_name
from wmcheck.statestore.formats.row_checksums import CHECKSUM_BYTES
from wmcheck.statestore.formats.sized_columns import file_records, joined, key_fingerprints, keys_equal, word_view

from ..errors import CheckpointError
from . import state_reads
from .context import Context
from .definition import WARNING, Issue, check
from .loaded_state import Reader
from .state_reads import content_loads, judged_for_output, rewind_fix


def absent_delete(reader: Reader, load: StoreLoad, checksums: bool) -> StateFile | None:
    """The first delta of an HDFS load's chain that deletes a key the state before it does not hold; None when every
    delete finds its key, or the load is not read here (RocksDB, a failing or skipping load, over the budget).
    ``checksums``: deleted keys carry their row checksum first (rowChecksum.enabled)."""
    chain = load.chain
    if (not chain or load.failure is not None or load.skipped or not load.loadable
            or any(f.format.decoder != RECORDS for f in chain)):
        return None
    data = reader.take([f.path for f in chain], sum(f.size for f in chain))
    if data is None:
        return None
    held: set[bytes] = set()
    skip = CHECKSUM_BYTES if checksums else 0
    try:
        plain = [decompress(data[f.path], reader.codec, f.path) for f in chain]
        found = _absent_delete_columns(chain, plain) if state_reads.columnar(sum(map(len, plain))) and not checksums else None
        if found is not None:
            return found[0] if found else None
        for f, contents in zip(chain, plain):
            for kind, key, _ in sized_records(contents, f.path):
                if kind != DELETE:
                    held.add(key)
                elif key[skip:] in held:
                    held.discard(key[skip:])
                else:
                    return f
    except (CheckpointError, KeyError):
        return None  # damaged (WM039) or unreadable
    return None


def _absent_delete_columns(chain: tuple[StateFile, ...], plain: Sequence[bytes]) -> list[StateFile] | None:
    """:func:`absent_delete` of the decompressed files without a Python object per record: every record found at
    once (:func:`..sized_columns.file_records`), the records grouped by their keys' fingerprints in chain order, and
    a delete judged by the record before it of its key (a put holds the key); ``[file]`` of the first delete whose
    key no record holds, ``[]`` when none, None where the reference reads the files (records not where Spark's
    sizes put them, two keys sharing a fingerprint)."""
    import numpy as np

    records = [file_records(contents) for contents in plain]
    if any(r is None for r in records):
        return None
    chain_records = joined([r for r in records if r is not None])
    deletes = np.flatnonzero(chain_records.deleted)
    if not len(deletes):
        return []
    words, starts = word_view(chain_records.data), chain_records.starts + 4
    sizes = (chain_records.key_ends - starts) >> 3
    fingerprints = key_fingerprints(words, starts, sizes)
    order = np.argsort(fingerprints, kind="stable")  # a key's records in chain order
    place = np.empty(len(order), np.int64)
    place[order] = np.arange(len(order))
    before = order[np.maximum(place[deletes] - 1, 0)]
    same = (place[deletes] > 0) & (fingerprints[before] == fingerprints[deletes])
    if not keys_equal(words, starts[deletes[same]], sizes[deletes[same]], starts[before[same]], sizes[before[same]]):
        return None
    absent = deletes[~(same & ~chain_records.deleted[before])]
    if not len(absent):
        return []
    counts = np.cumsum([len(r.starts) for r in records if r is not None])
    return [chain[int(np.searchsorted(counts, absent.min(), side="right"))]]


@check("WM078", WARNING, "an HDFS state delta the next batch loads deletes a key the version before it lacks")
def deletes_of_absent_keys(ctx: Context) -> Iterator[Issue]:
    reader, checksums = Reader(ctx), Decoding.of(ctx.conf).row_checksums
    for load in content_loads(ctx):
        if not judged_for_output(ctx, load.part.operator_id):
            continue
        found = absent_delete(reader, load, checksums)
        if found is None:
            continue
        version = found.version
        why, fix = rewind_fix(ctx, version - 1)
        yield Issue(found.path, (
            f"{found.path}, a delta of state version {version} that the next batch loads (version {load.version}), "
            f"deletes a key that version {version - 1} does not hold: Spark's HDFS-backed store writes a delete only "
            f"for a key it removed, so this is not the file Spark wrote for version {version} (an older delta of the "
            f"partition copied over it, or another partition's). Spark loads it without an error, and whatever the "
            f"lost delta held is gone: nothing here tells whether the output needed it (state_types's state/0/1/"
            f"{file_name(10, found.format.kind)} replaced by its {file_name(9, found.format.kind)} restarts with the control run's output, tested); {why}"
        ), fix)
