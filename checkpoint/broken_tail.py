"""The warning every command that reads batches prints when the last offsets files are broken."""
from __future__ import annotations

from .errors import CheckpointError
from .model import Checkpoint


def _what(error: CheckpointError | None) -> str:
    """Where in the file and what is wrong, without the file's name or the hint."""
    if error is None:
        return "unreadable"
    where = f"line {error.line}: " if error.line is not None else f"byte {error.byte}: " if error.byte is not None else ""
    return where + error.message


def broken_tail_warning(ckpt: Checkpoint) -> str | None:
    """What a broken tail means and its fix: the last ``offsets/N`` empty or truncated (what a crash while Spark
    writes it leaves) makes Spark fail on restart; removed by a rewind, Spark plans the batch again."""
    tail = ckpt.broken_tail
    if not tail:
        return None
    first, last = tail[0], tail[-1]
    error = ckpt.offsets_failure(last)
    files = f"offsets/{first}" if first == last else f"offsets/{first}..{last}"
    one = first == last
    state = ("is empty" if one else "are empty") if error is not None and error.message.startswith("file is empty") else \
        f"do{'es' if one else ''} not parse ({_what(error)})"
    keep = next((b for b in reversed(ckpt.commit_ids) if b < first), None)
    fix = (f"wmcheck rewind CKPT --to-batch {keep} removes {'it' if one else 'them'} with the checksum files, and Spark "
           f"plans batch {keep + 1} again on restart" if keep is not None else
           "no committed batch comes before it: start the query from a new checkpoint location")
    readable = ckpt.last_readable_batch
    shown = f"shown here: the checkpoint up to batch {readable}" if readable is not None else "no batch can be shown"
    return (f"{files} {state}, as a crash while Spark writes the file leaves it: Spark fails to restart on it; "
            f"fix: {fix} ({shown})")
