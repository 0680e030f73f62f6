"""Every state store file format Spark writes, in one registry: how a file is named and listed, what it is
to a load (a full copy or an increment), which reader decodes it, and how a rewind removes it.

A store partition directory ``state/<op>/<partition>/[<store>/]`` holds, per version ``V``:

* HDFS provider (``HDFSBackedStateStoreProvider``): ``V.delta`` (the changes of one version) and
  ``V.snapshot`` (the whole state), both a compressed stream of size-prefixed key/value records;
* RocksDB provider (``RocksDBFileManager``): ``V.zip`` (RocksDB's own files and a ``metadata`` entry
  naming the shared ``SSTs/*.sst`` it needs, with their sizes) and ``V.changelog`` (changelog
  checkpointing: the puts, deletes and merges of one version);
* checkpoint format 2: the same names with the unique id of the run that wrote them, ``V_<uuid>.zip``;
* Spark 4.1+ with checkpoint format 2: a JSON checksum file ``<file>.crc`` beside each of them (see
  :mod:`wmcheck.checkpoint.checksums`); Hadoop's ``.<file>.crc`` sidecars on local and HDFS file systems.

Rows written with ``rowChecksum.enabled`` carry a checksum inside the records (not a file format).
Adding a format means adding a :class:`StateFormat` to :data:`FORMATS` (and, when no existing :class:`Decoder`
reads it, a new one here and its function in :mod:`wmcheck.statestore.formats.content`); the scan, the checks, the
rewind, ``show``'s counts and the python engine all go through this module: no module outside statestore/ spells a
suffix, the shared directory or a decoder (tests/test_layers.py).
"""
from __future__ import annotations

import re
from typing import Iterable, Literal

from wmcheck.checkpoint.numbers import java_long
from wmcheck.checkpoint.records import dataclass

Kind = Literal["snapshot", "delta", "zip", "changelog"]
"""A state file's kind: the suffix of its name."""
Provider = Literal["hdfs", "rocksdb"]
Role = Literal["base", "increment"]


@dataclass(frozen=True)
class Decoder:
    """A reader of state files: what the bytes of its formats' files hold (:data:`wmcheck.statestore.formats.content.DECODERS`
    gives its function)."""

    name: str
    rows: bool
    """The file holds the rows itself, read entry by entry (HDFS records, a RocksDB changelog); else it is a RocksDB
    snapshot zip, whose rows are in the SST tables it names."""
    rocksdb: bool
    """Its rows are the RocksDB provider's (encoded by its key and value encoders)."""


RECORDS = Decoder("records", rows=True, rocksdb=False)
"""HDFS deltas and snapshots: one compressed stream of size-prefixed records."""
ROCKSDB_ZIP = Decoder("rocksdb-zip", rows=False, rocksdb=True)
"""A RocksDB snapshot: a zip of RocksDB's own files and the ``metadata`` naming its SST tables."""
ROCKSDB_CHANGELOG = Decoder("rocksdb-changelog", rows=True, rocksdb=True)
"""A RocksDB changelog: the puts, deletes and merges of one version."""
DECODERS: tuple[Decoder, ...] = (RECORDS, ROCKSDB_ZIP, ROCKSDB_CHANGELOG)
SST_DIR = "SSTs"
"""The directory of a RocksDB store's shared table files, which its snapshots name."""
SST_SUFFIX = ".sst"
"""The suffix of those table files (``SSTs/<n>-<uuid>.sst``)."""


@dataclass(frozen=True)
class StateFormat:
    """One versioned state file format."""

    kind: Kind
    """The file name's suffix, also :attr:`StateFile.kind`."""
    provider: Provider
    role: Role
    """``base``: the whole state of its version (a load starts from the newest one at or below the version);
    ``increment``: the changes of its version (a load applies every one after the base)."""
    decoder: Decoder
    """Which reader decodes it (:mod:`wmcheck.statestore.formats.content`): size-prefixed records, a RocksDB snapshot
    zip, a changelog."""
    plural: str
    """Its count's name in ``show`` (``OperatorSummary.files``)."""
    read_later: bool
    """A file of a version the query has not reached is read by a later load instead of the one Spark writes:
    the loader takes the newest full copy at or below a version, while Spark writes increments at every
    commit over whatever is there (``createAtomic(overwriteIfPossible = true)``)."""
    shared_dir: str | None = None
    """The directory of the immutable files a base names (RocksDB ``SSTs/``), removed by a rewind only when no
    kept base names them."""
    each_commit_alone: bool = False
    """In a store without increments the provider writes this full copy at every commit, over a stale file of that
    version (RocksDB without changelog checkpointing uploads ``V.zip`` when it commits ``V``), so a stale one is
    not read later (:attr:`read_later` holds for stores with increments only)."""


FORMATS: tuple[StateFormat, ...] = (
    StateFormat("snapshot", "hdfs", "base", RECORDS, "snapshots", read_later=True),
    StateFormat("delta", "hdfs", "increment", RECORDS, "deltas", read_later=False),
    StateFormat("zip", "rocksdb", "base", ROCKSDB_ZIP, "zips", read_later=True, shared_dir=SST_DIR,
                each_commit_alone=True),
    StateFormat("changelog", "rocksdb", "increment", ROCKSDB_CHANGELOG, "changelogs", read_later=False),
)
BY_KIND: dict[str, StateFormat] = {f.kind: f for f in FORMATS}
BASE_KINDS = frozenset(f.kind for f in FORMATS if f.role == "base")
INCREMENT_KINDS = frozenset(f.kind for f in FORMATS if f.role == "increment")
SHARED_DIRS = frozenset(f.shared_dir for f in FORMATS if f.shared_dir)
VERSION_FILE = re.compile(r"^(0|[1-9][0-9]*)(?:_([0-9A-Za-z-]+))?\.(" + "|".join(re.escape(f.kind) for f in FORMATS) + r")$")
"""``V.<kind>`` or, checkpoint format 2, ``V_<unique id>.<kind>``: ``V`` as Spark writes it (``013.zip`` is no file of
version 13: Spark reads a version's file by the name it gives it)."""


def version_file(name: str) -> tuple[StateFormat, int, str | None] | None:
    """(format, version, unique id or None) of a versioned state file's name; None for any other name."""
    match = VERSION_FILE.match(name)
    return (BY_KIND[match[3]], int(match[1]), match[2]) if match else None


def provider_of(kinds: set[str] | frozenset[str], default: Provider = "hdfs") -> Provider:
    """The provider whose formats ``kinds`` are (``default`` when there are none)."""
    return next((f.provider for f in FORMATS if f.kind in kinds), default)


def formats_of(provider: Provider) -> tuple[StateFormat, StateFormat]:
    """(base, increment) format of a provider."""
    mine = [f for f in FORMATS if f.provider == provider]
    return next(f for f in mine if f.role == "base"), next(f for f in mine if f.role == "increment")


def unloadable_base_name(name: str, provider: Provider, version: int, bases: Iterable[int]) -> bool:
    """Whether ``provider``'s loader fails on the file ``name`` when it loads ``version`` of a partition whose own full
    copies are of versions ``bases``. It lists every name ending in ``.<kind>`` of its base format, reads what comes
    before as a version with ``Long.parseLong`` (``SnapshotLoaderHelper.getEligibleSnapshotsForVersion``) and reads
    the newest at or below ``version`` by the name Spark gives that version: a name that is no number (``old.zip``,
    ``x.snapshot``) fails the listing; an HDFS snapshot named otherwise (``012.snapshot``) that is the newest fails its
    read (RocksDB's loader falls back to an older snapshot; checkpoint format 1)."""
    suffix = f".{formats_of(provider)[0].kind}"
    if not name.endswith(suffix):
        return False
    listed = java_long(name[: -len(suffix)])
    if listed is None:
        return True
    return provider == "hdfs" and 0 < listed <= version and not any(listed <= b <= version for b in bases)


def file_name(version: int, kind: Kind, unique_id: str | None = None) -> str:
    """The name Spark gives a file of ``kind`` for ``version`` (checkpoint format 2: with its unique id)."""
    return f"{version}{'_' + unique_id if unique_id else ''}.{kind}"
