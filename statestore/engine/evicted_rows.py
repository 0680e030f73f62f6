"""State rows as the python engine returns them (``operator_id, store, partition_id, key, value, event_time_ms``
and, where asked, ``older``), built from decoded columns without Arrow's compute functions; and the eviction rule
applied to an event-time column with NumPy, as :func:`wmcheck.statestore.engine.python_engine.time_columns` applies it with Arrow: the fast
path of ``--older-than-watermark``, which decodes the rows a chunk evicts and nothing else."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wmcheck.statestore.eviction import Eviction

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from wmcheck.statestore.discovery import Store


def evicted(values: "np.ndarray", valid: "np.ndarray", rule: Eviction, watermark_ms: int) -> tuple["np.ndarray", ...]:
    """``(event_time_ms, known, older)`` of the event-time column ``values`` (set where ``valid``) under ``rule``:
    epoch milliseconds (microseconds floored), known where set and not the rule's unset value, older where the
    watermark evicts the row."""
    valid = valid if rule.unset is None else valid & (values != rule.unset)
    threshold = watermark_ms * (1000 if rule.unit == "us" else 1)
    older = valid & ((values < threshold) if rule.strict else (values <= threshold))
    return (values // 1000 if rule.unit == "us" else values), valid, older


def _numbers(values: "np.ndarray", valid: "np.ndarray | None", arrow: "pa.DataType") -> "pa.Array":
    import numpy as np
    import pyarrow as pa

    mask = None if valid is None or valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(arrow, len(values), [mask, pa.py_buffer(np.ascontiguousarray(values))])


def _strings(text: str, n: int) -> "pa.Array":
    """``text`` ``n`` times, a large string array."""
    import numpy as np
    import pyarrow as pa

    data = text.encode()
    offsets = np.arange(n + 1, dtype=np.int64) * len(data)
    return pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])


def rows_table(store: "Store", partition_id: Any, key: Any, value: Any, event_time_ms: Any, older: Any = None) -> "pa.Table":
    """The state rows of one store: ``partition_id`` an int32 column or one partition's number, ``event_time_ms`` an
    int64 column or ``(values, known)`` NumPy arrays, ``older`` a boolean column (left out when None)."""
    import numpy as np
    import pyarrow as pa

    n = len(key)
    if isinstance(partition_id, int):
        partition_id = _numbers(np.full(n, partition_id, np.int32), None, pa.int32())
    if isinstance(event_time_ms, tuple):
        times, known = event_time_ms
        event_time_ms = _numbers(times, known, pa.int64())
    columns = {"operator_id": _numbers(np.full(n, store.operator_id, np.int32), None, pa.int32()),
               "store": _strings(store.name, n), "partition_id": partition_id, "key": key, "value": value,
               "event_time_ms": event_time_ms}
    if older is not None:
        columns["older"] = older
    return pa.Table.from_arrays(list(columns.values()), names=list(columns))
