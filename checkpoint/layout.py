"""Where things are in a checkpoint (and a file sink): directory and file names, as Spark and wmcheck lay them out."""
from __future__ import annotations

import posixpath

from .numbers import is_canonical, java_long

METADATA, OFFSETS, COMMITS, SOURCES, STATE = "metadata", "offsets", "commits", "sources", "state"
SINK_LOG = "_spark_metadata"
"""A file sink's log, inside the sink's output directory."""
OWN_DIR = "_wmcheck"
"""wmcheck's own directory in a checkpoint: the journal of a running repair, the lock, the backups."""
REPAIR_JOURNAL = f"{OWN_DIR}/journal.json"
BACKUPS = f"{OWN_DIR}/backups"
COMPACT_SUFFIX = ".compact"
CRC_SUFFIX = ".crc"
DEFAULT_STORE = "default"


def batch_ids(names: list[str]) -> list[int]:
    """Batch ids of a metadata log directory (files named by a bare number, as Spark names them), sorted."""
    return sorted(int(name) for name in names if is_canonical(name))


def odd_batch_names(names: list[str], compactible: bool = False) -> dict[str, int]:
    """Names Spark also lists as batch files that it never writes (``013``, ``+13``, ``\u0661\u0663``; in a
    ``compactible`` log also ``013.compact``): name -> the batch id Spark reads them as (``HDFSMetadataLog`` takes any
    name ``toLong`` parses, ``CompactibleFileStreamLog`` any once ``.compact`` is stripped, then reads the file of that
    id's own name)."""
    out = {}
    for name in names:
        base = name[: -len(COMPACT_SUFFIX)] if compactible and name.endswith(COMPACT_SUFFIX) else name
        if not is_canonical(base) and (batch := java_long(base)) is not None:
            out[name] = batch
    return out


def log_file_batch(name: str) -> tuple[int, bool] | None:
    """A compactible log's file name -> (batch id, compact?): ``12`` -> (12, False), ``12.compact`` -> (12, True);
    None for anything else (``012``: :func:`odd_batch_names`)."""
    base = name[: -len(COMPACT_SUFFIX)] if name.endswith(COMPACT_SUFFIX) else name
    return (int(base), base != name) if is_canonical(base) else None


def hadoop_sidecar(path: str) -> str:
    """Hadoop's checksum file of ``path``: ``dir/name`` -> ``dir/.name.crc``."""
    folder, slash, name = path.rpartition("/")
    return f"{folder}{slash}.{name}{CRC_SUFFIX}"


def spark_sidecar(path: str) -> str:
    """Spark's (4.1+) checksum file of ``path``: ``dir/name`` -> ``dir/name.crc``."""
    return f"{path}{CRC_SUFFIX}"


def sidecars(path: str) -> tuple[str, str]:
    """The Hadoop and the Spark checksum files of ``path``."""
    return hadoop_sidecar(path), spark_sidecar(path)


def all_sidecars(path: str) -> tuple[str, str, str]:
    """Every checksum file that belongs to ``path``: Hadoop's, Spark's, and Hadoop's of Spark's."""
    return hadoop_sidecar(path), spark_sidecar(path), hadoop_sidecar(spark_sidecar(path))


def sidecar_target(path: str) -> tuple[str, str] | None:
    """``("hadoop" | "spark", main file path)`` for a checksum file's path, else None.

    Hadoop's sidecars are hidden (``dir/.name.crc``); Spark's are not (``dir/name.crc``).
    """
    directory, name = posixpath.split(path)
    if not name.endswith(CRC_SUFFIX) or len(name) == len(CRC_SUFFIX):
        return None
    if name.startswith(".") and len(name) > len(CRC_SUFFIX) + 1:
        return "hadoop", posixpath.join(directory, name[1 : -len(CRC_SUFFIX)])
    return "spark", posixpath.join(directory, name[: -len(CRC_SUFFIX)])


def state_dir(operator_id: int, partition: int, store: str = DEFAULT_STORE) -> str:
    """``state/<op>/<partition>[/<store>]``: a store partition's directory."""
    base = f"{STATE}/{operator_id}/{partition}"
    return base if store == DEFAULT_STORE else f"{base}/{store}"
