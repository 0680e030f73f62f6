"""One recommended repair per checkpoint: when findings print different wmcheck fixes, the one to run."""
from __future__ import annotations

import re
from typing import Iterable

from .definition import ERROR, Finding

REWIND = re.compile(r"wmcheck rewind CKPT --to-batch (\d+)( --file-sink SINK)?")
COMMAND = re.compile(r"wmcheck (?:set-watermark|relocate|undo) CKPT[^;()]*?(?= \(|;|\.(?:\s|$)|$)")
INTERRUPTED = "WM026"


def recommended_repair(findings: Iterable[Finding], file_sink: bool = False) -> str | None:
    """The wmcheck command that makes the restart work when the errors print several: an interrupted repair is
    undone first; among rewinds the earliest batch (a rewind there also drops every later problem, and the
    restart oracle's cases prove it), with the file sink when one was checked (else the sink is left ahead of the
    checkpoint, WM024); else the one other command the errors agree on. None when no error prints a wmcheck
    command, or they print different commands that are not rewinds."""
    errors = [f for f in findings if f.severity == ERROR]
    if any(f.code == INTERRUPTED for f in errors):
        return "wmcheck undo CKPT"
    rewinds = [m for f in errors for m in REWIND.finditer(f.message)]
    if rewinds:
        batch = min(int(m[1]) for m in rewinds)
        with_sink = file_sink or any(m[2] for m in rewinds)
        return f"wmcheck rewind CKPT --to-batch {batch} --file-sink SINK" if with_sink else f"wmcheck rewind CKPT --to-batch {batch}"
    others = {m[0].strip() for f in errors for m in COMMAND.finditer(f.message)}
    return others.pop() if len(others) == 1 else None
