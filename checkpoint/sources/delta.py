"""Delta Lake sources (``DeltaSource``): the offset ``{"sourceVersion", "reservoirId", "reservoirVersion", "index",
"isStartingVersion"}`` is the table version and file index a batch read up to; the files are in the table's log
(:mod:`.delta_files`), its state now against the offsets in :mod:`.delta_table`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import unquote

from wmcheck.checkpoint.errors import CheckpointError, arg

from .protocol import InputFile, InputRequest, LiveCheck, SourceInput, SourceKind

if TYPE_CHECKING:
    from wmcheck.checkpoint.logs.source_offsets import SourceOffset

    from .delta_files import DeltaSourceLog
    from .protocol import CheckpointReads

DELTA_KEYS = frozenset({"sourceVersion", "reservoirVersion", "index"})


DELTA_LIVE = LiveCheck("WM089-WM091", "a Delta source's offsets with its table's log and files as they are now",
                       "the table", arg("delta_source", "PATH"))
"""What check verifies of a Delta source against its table (:mod:`wmcheck.checkpoint.checks.delta_source`)."""


class DeltaSource(SourceKind):
    name = "delta"
    file_log_dir = False
    position = "version"
    live = DELTA_LIVE

    def matches(self, src: SourceOffset) -> bool:
        return isinstance(src.value, dict) and DELTA_KEYS <= set(src.value)

    def version(self, src: SourceOffset) -> dict[str, Any] | None:
        value = src.value
        return {k: value[k] for k in ("reservoirVersion", "index", "isStartingVersion") if k in value}

    def summary(self, src: SourceOffset) -> str:
        return f"delta version {src.value['reservoirVersion']} index {src.value['index']}"

    def location(self, ckpt: CheckpointReads, src: SourceOffset) -> str | None:
        return f"table {src.value['reservoirId']}" if isinstance(src.value, dict) and src.value.get("reservoirId") else None

    def batch_input(self, ckpt: CheckpointReads, batch: int, src: SourceOffset, prev: SourceOffset | None,
                    request: InputRequest) -> SourceInput:
        if request.delta_source is None:
            return SourceInput(src.source_id, self.name, prev, src, replayable=False,
                               note="Delta source: read versions/indexes after start up to end with delta-spark")
        return _table_input(request.delta_source, batch, src, prev)

    def rewind_position(self, src: SourceOffset) -> str:
        return f"{src.value['reservoirVersion']} index {src.value['index']}"

    def input_text(self, src: SourceInput) -> str | None:
        files = f": {len(src.files)} file(s)" if src.replayable else ""  # from the table's log (--delta-source)
        return f"{src.start_version} -> {src.end_version}{files}"

    def input_fields(self, src: SourceInput, plain: Callable[[Any], Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"start_version": src.start_version, "end_version": src.end_version}
        if src.replayable:  # the files from the table's log (--delta-source)
            out.update(num_files=len(src.files), bytes=src.total_bytes, missing_files=len(src.missing), files=plain(src.files))
        return out


DELTA = DeltaSource()


def _table_input(table: DeltaSourceLog, batch: int, src: SourceOffset, prev: SourceOffset | None) -> SourceInput:
    recorded = src.value.get("reservoirId")
    if table.table_id != recorded:
        raise CheckpointError(f"the table at {table.location} (id {table.table_id}) is not the table batch {batch} read "
                              f"(reservoirId {recorded})", path=f"offsets/{batch}",
                              hint=f"pass the path of the table the query reads as {arg('delta_source')}",
                              param="delta_source")
    files = tuple(InputFile(f.path, table.location_of(f), f.version, f.size, table.fs.exists(unquote(f.path)),
                            dict(f.partition))
                  for f in table.batch_files(prev, src))
    return SourceInput(src.source_id, DELTA.name, prev, src, files=files, table_schema=table.schema_json)
