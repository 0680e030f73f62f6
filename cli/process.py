"""Settings of the whole process that outlast a command: made only when wmcheck is the process (its
console script), never when a caller runs a command in its own process."""
from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from typing import Any, Iterator, NoReturn

EXIT_INTERRUPTED = 130
"""Ctrl-C: 128 + SIGINT, as a shell reports a process the signal ended."""
EXIT_BROKEN_PIPE = 141
"""Output piped into ``head`` & co. that stopped reading: 128 + SIGPIPE, silently, as a shell tool ends."""


class _Hidden:
    """A module finder that reports the given top-level modules as not installed."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


_PROCESS: dict[str, Any] = {"own": False, "stderr": 2}


def own_process() -> None:
    """Called by the console script: wmcheck is the whole process, so commands may make settings that outlast them.
    Ctrl-C ends it at once (:func:`interrupted`)."""
    _PROCESS["own"] = True
    if _PROCESS["stderr"] == 2:  # Spark's start sends fd 2 to /dev/null for a while: the line still shows
        with contextlib.suppress(OSError):
            _PROCESS["stderr"] = os.dup(2)
    own_interrupts()


def own_interrupts() -> None:
    """Ctrl-C ends the process at once, wherever it is: in a wait on a remote store, in a call into Spark's JVM
    (pyspark's own handler, installed when a session starts, first cancels Spark's jobs), in a repair (which
    recovers from any point it stops at, as from a kill). Only when wmcheck is the process."""
    if _PROCESS["own"]:
        signal.signal(signal.SIGINT, lambda _signum, _frame: interrupted())


def interrupted() -> None:
    """End the process for Ctrl-C: exit 130, no traceback, without waiting for threads or Spark; the ``interrupted``
    line goes to the standard error the process started with (while a driver JVM starts, fd 2 is /dev/null)."""
    try:
        os.write(_PROCESS["stderr"], b"\ninterrupted\n")
    except OSError:
        pass
    os._exit(EXIT_INTERRUPTED)


def silence_stdout() -> None:
    """Send what is still buffered for stdout nowhere (its reader is gone), so the exit does not fail writing it."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def end_process(code: int, run_atexit: bool = True) -> NoReturn:
    """Exit with ``code`` as a normal exit does (the atexit handlers run, unless ``run_atexit`` is false; stdout and
    stderr flushed; :data:`EXIT_BROKEN_PIPE` where stdout's reader is gone) but without tearing the interpreter
    down: freeing every object of numpy, pyarrow and what was read takes a twentieth of a second that the
    kernel's release of the process's memory makes useless."""
    if run_atexit:
        atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        code = EXIT_BROKEN_PIPE
    except (OSError, ValueError):
        pass
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(code)


def owned() -> bool:
    """Whether wmcheck is the whole process (its console script)."""
    return _PROCESS["own"]


BLAS_THREADS = "OPENBLAS_NUM_THREADS"
"""numpy's BLAS (OpenBLAS) starts this many threads when numpy is imported, one per core if unset."""


@contextlib.contextmanager
def lean_imports() -> Iterator[None]:
    """Import numpy and pyarrow lean for a command that decodes state files (``state``'s python engine,
    ``check``) when wmcheck owns the process:
    - pandas unimportable (when not imported yet): pyarrow imports it on its first conversion of Python values
      (0.3 s) to recognise its objects, and wmcheck hands it none; pyarrow then goes without pandas for the
      rest of the process;
    - numpy's BLAS given one thread (when numpy is not imported yet and :data:`BLAS_THREADS` is unset): it starts
      a thread per core at import, a twentieth of a second of the command's start, and wmcheck multiplies no
      matrices; the variable is unset again after the command, for anything the process starts later (Spark's
      Python workers).
    numpy stays: state files are decoded column-wise with it. A caller's process (wmcheck called in-process) is left
    alone."""
    if not _PROCESS["own"]:
        yield
        return
    finder = _Hidden(("pandas",))
    sys.meta_path.insert(0, finder)
    one_thread = BLAS_THREADS not in os.environ and "numpy" not in sys.modules
    if one_thread:
        os.environ[BLAS_THREADS] = "1"
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        if one_thread:
            os.environ.pop(BLAS_THREADS, None)


MPL_DIR = "MPLCONFIGDIR"
"""matplotlib's config and cache directory; unset: ``$XDG_CONFIG_HOME``/``$XDG_CACHE_HOME`` (or ``~/.config``,
``~/.cache``) ``/matplotlib``."""


def writable_matplotlib_dir() -> None:
    """Give matplotlib a config and cache directory of this user's under the temporary directory when wmcheck is
    the process and the default ones cannot be created or written (an unwritable or missing HOME): matplotlib would
    print two lines about it on import (and build its font cache again on every run). Before matplotlib is
    imported; a caller's :data:`MPL_DIR` is kept."""
    if not _PROCESS["own"] or MPL_DIR in os.environ or "matplotlib" in sys.modules or not hasattr(os, "getuid"):
        return
    home = os.path.expanduser("~")
    for base in (os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"),
                 os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")):
        wanted = os.path.join(base, "matplotlib")
        try:
            os.makedirs(wanted, exist_ok=True)
        except OSError:
            break
        if not os.access(wanted, os.W_OK):
            break
    else:
        return
    os.environ[MPL_DIR] = _own_scratch(f"wmcheck-matplotlib-{os.getuid()}")


def _own_scratch(name: str) -> str:
    """A directory ``name`` under the temporary directory that only this user can write (kept for the next run), or,
    where someone else made that name, a new one removed at exit."""
    import shutil
    import stat
    import tempfile

    path = os.path.join(tempfile.gettempdir(), name)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    got = os.lstat(path)
    if stat.S_ISDIR(got.st_mode) and got.st_uid == os.getuid() and not got.st_mode & 0o022:
        return path
    scratch = tempfile.mkdtemp(prefix="wmcheck-matplotlib-")
    atexit.register(shutil.rmtree, scratch, True)
    return scratch
