"""One repair (or undo) at a time: ``_wmcheck/lock``, created atomically, naming its owner.

The lock file holds the owner's pid, host, start time and command. It is created whole in one step
(a hard link of a finished temp file) and removed when the repair ends, also when it fails. A lock
left by a killed run on this host (its pid no longer running) is taken over with a message; one from
another host is refused, since wmcheck cannot tell whether that process still runs.
"""
from __future__ import annotations

import json
import os
import socket
import uuid
from pathlib import Path

from wmcheck.checkpoint.records import dataclass

from ..errors import CheckpointError, MissingFileError, RefusedError
from ..fs import TEMP_SUFFIX, FileSystem
from ..layout import OWN_DIR
from ..numbers import is_number
from ..timeutil import format_ms

LOCK = f"{OWN_DIR}/lock"
ATTEMPTS = 3


@dataclass(frozen=True)
class Owner:
    pid: int
    host: str
    started_ms: int
    command: str
    token: str

    def to_bytes(self) -> bytes:
        return json.dumps({"pid": self.pid, "host": self.host, "started_ms": self.started_ms,
                           "command": self.command, "token": self.token}).encode("utf-8")

    def describe(self) -> str:
        return f"wmcheck {self.command} (pid {self.pid} on {self.host}, since {format_ms(self.started_ms)})"


def _parse(data: bytes) -> Owner | None:
    try:
        doc = json.loads(data)
        return Owner(int(doc["pid"]), str(doc["host"]), int(doc["started_ms"]), str(doc["command"]), str(doc["token"]))
    except (ValueError, TypeError, KeyError, RecursionError):
        return None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and waits to be reaped (Linux): a killed wmcheck whose parent died too stays one
    until init reaps it, which the init of a container may never do."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, UnicodeDecodeError):
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]


@dataclass
class Lock:
    """A held lock; ``took_over`` says whose stale lock it replaced (None: the lock was free)."""

    fs: FileSystem
    owner: Owner
    took_over: str | None = None

    def check(self) -> None:
        """Fail if the lock is no longer ours (removed or taken by hand meanwhile)."""
        try:
            held = _parse(self.fs.read(LOCK))
        except MissingFileError:
            held = None
        if held is None or held.token != self.owner.token:
            raise RefusedError("wmcheck's lock on this checkpoint was removed or taken while this repair ran",
                               path=LOCK, hint="run 'wmcheck backups CKPT' and re-run the command (or undo) once "
                                               "no other wmcheck runs")

    def release(self) -> None:
        try:
            held = _parse(self.fs.read(LOCK))
        except MissingFileError:
            return
        if held is not None and held.token == self.owner.token:
            self.fs.delete(LOCK)


def _remove_dead_temps(fs: FileSystem) -> None:
    """Temp files of lock attempts by processes killed meanwhile (``.lock.<pid>.wmcheck.tmp``)."""
    for info in fs.list_dir(OWN_DIR):
        parts = info.name.split(".")
        if info.name.startswith(".lock.") and info.name.endswith(TEMP_SUFFIX) and len(parts) == 5 and \
                is_number(parts[2]) and not _running(int(parts[2])):
            fs.delete(info.path)


def acquire(fs: FileSystem, command: str, now_ms: int) -> Lock:
    """Take the checkpoint's lock for ``command``, or refuse naming who holds it."""
    owner = Owner(os.getpid(), socket.gethostname(), now_ms, command, uuid.uuid4().hex)
    took_over = None
    for _ in range(ATTEMPTS):
        if fs.create_new(LOCK, owner.to_bytes()):
            _remove_dead_temps(fs)
            return Lock(fs, owner, took_over)
        try:
            data = fs.read(LOCK)
        except MissingFileError:
            continue  # released meanwhile: try again
        held = _parse(data)
        if held is None:
            raise CheckpointError("the wmcheck lock file is not one wmcheck wrote", path=LOCK,
                                  hint="make sure no wmcheck runs on this checkpoint, then remove the file")
        if held.host != owner.host or _running(held.pid):
            raise RefusedError(f"another repair is running on this checkpoint: {held.describe()}", path=LOCK,
                               hint="wait for it to finish; if that process is gone (another host), remove the "
                                    "lock file by hand")
        aside = f"{LOCK}.{owner.token}.stale"
        try:
            fs.rename(LOCK, aside)
        except MissingFileError:
            continue
        if fs.read(aside) != data:  # someone else's fresh lock, not the stale one: give it back
            fs.create_new(LOCK, fs.read(aside))
            fs.delete(aside)
            continue
        fs.delete(aside)
        took_over = f"took over the lock of {held.describe()}, which is no longer running"
    raise RefusedError("could not take wmcheck's lock on this checkpoint (other wmcheck processes keep taking it)",
                       path=LOCK, hint="wait for them to finish and try again")
