"""Tasks run in parallel worker processes, their outputs streamed back as they come, under a memory budget.

:func:`run` calls ``work(job, task)`` for every task and yields what it yields. ``jobs`` worker processes
take tasks from a queue and put each output on a bounded queue (a worker waits while the consumer is
behind, so memory holds a few outputs, not a task's whole result); with one job the tasks run in this
process instead (no fork, nothing sent between processes). Workers are forked when the checkpoint is local (they share what
this process has imported) and started by a fork server otherwise (a process that has not touched a
remote file system's client threads). An error in a worker stops them all and is raised here: the error of
the first task that fails in the order of ``tasks`` (the one a run in this process raises), once the tasks
before it are done; a stopped worker (SIGTERM, SIGINT) cleans up after itself and exits. Workers make their
temporary files in one directory that :func:`run` removes once they have all ended, so a worker killed in the
middle of anything (its own clean-up included) leaves nothing behind.

The memory budget (``max_memory`` bytes) is the memory of this process and its workers (proportional
set sizes: pages a forked worker shares with this process count once), sampled every 100 ms: past it the
workers are stopped (with one job, this process is interrupted where it is) and :func:`run` raises one
CheckpointError naming the budget, rather than letting the machine swap.
"""
from __future__ import annotations

import importlib
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import tempfile
import threading
from contextlib import closing, nullcontext
from typing import Any, Callable, Generator, Iterator, Sequence

from wmcheck.checkpoint.errors import CheckpointError, arg

SAMPLE_S = 0.1
STOP_S = 5.0
"""How long a stopped worker has to clean up before it is killed."""
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_DONE, _OUT, _ERROR = "done", "out", "error"


def default_jobs() -> int:
    """Every core this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def available_memory() -> int | None:
    """What this process holds plus ``MemAvailable`` of ``/proc/meminfo``, in bytes: how far it may grow
    before the machine swaps (None where there is no such file)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 + resident(os.getpid())
    except OSError:
        return None
    return None


def resident(pid: int) -> int:
    """Memory of process ``pid`` in bytes (0 once it is gone): its proportional set size, so that pages a
    forked worker still shares with this process count once, else its resident set size."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


class _Guard:
    """Samples the resident memory of this process and ``pids`` in a thread; past the budget it stops the
    workers (``on_exceed``) and records by how much (:meth:`failure` explains)."""

    def __init__(self, limit: int, on_exceed: Callable[[], None], alone: bool = False) -> None:
        self.limit, self.on_exceed, self.alone = limit, on_exceed, alone
        self.pids: list[int] = []
        self.exceeded: int | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> "_Guard":
        if self._over():  # already over it: fail before any work
            raise self.failure()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _over(self) -> bool:
        used = resident(os.getpid()) + sum(resident(p) for p in list(self.pids))
        if used > self.limit:
            self.exceeded = used
        return self.exceeded is not None

    def _watch(self) -> None:
        while not self.stop.wait(SAMPLE_S):
            if self._over():
                self.on_exceed()
                return

    def failure(self) -> CheckpointError:
        assert self.exceeded is not None
        who, hint = (("wmcheck", f"raise {arg('max_memory')} (the read holds a chunk of a partition at a time)")
                     if self.alone else ("wmcheck and its workers", f"raise {arg('max_memory')}, or use fewer "
                                         f"{arg('jobs')} (each worker holds a chunk of a partition)"))
        return CheckpointError(f"stopped: {who} used {self.exceeded >> 20} MiB of memory, over "
                               f"{arg('max_memory', self.limit >> 20)} MiB", param="max_memory", hint=hint)


def run(work: Callable[[Any, Any], Generator[Any, None, None]], job: Any, tasks: Sequence[Any], jobs: int = 1,
        max_memory: int | None = None, fork: bool = True) -> Iterator[Any]:
    """Everything ``work(job, task)`` yields for each of ``tasks`` (in the order outputs arrive), using up to
    ``jobs`` processes (one: this process); ``work`` and ``job`` must be picklable unless ``fork``."""
    if not tasks:
        return
    if jobs <= 1:
        yield from _here(work, job, tasks, max_memory)
        return
    workers: list[Any] = []
    guard = _Guard(max_memory, lambda: _stop(workers)) if max_memory is not None else None
    with tempfile.TemporaryDirectory(prefix="wmcheck-workers-") as scratch, guard if guard is not None else nullcontext():
        try:
            yield from _parallel(work, job, tasks, min(max(jobs, 1), len(tasks)), fork, workers, guard, scratch)
        finally:
            _stop(workers)


def _here(work: Callable[[Any, Any], Generator[Any, None, None]], job: Any, tasks: Sequence[Any],
          max_memory: int | None) -> Iterator[Any]:
    """The tasks in this process. Under a budget the guard's thread interrupts the main thread past it (a
    SIGUSR1 whose handler raises the budget's error wherever the main thread is); a caller in another thread
    is stopped at its next output instead."""
    if max_memory is None:
        for task in tasks:
            with closing(work(job, task)) as outputs:
                yield from outputs
        return
    main = threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGUSR1")
    guard = _Guard(max_memory, lambda: os.kill(os.getpid(), signal.SIGUSR1) if main else None, alone=True)

    def over(_signum: int, _frame: Any) -> None:
        raise guard.failure()

    before = signal.signal(signal.SIGUSR1, over) if main else None
    try:
        with guard:
            for task in tasks:
                with closing(work(job, task)) as outputs:
                    for output in outputs:
                        if guard.exceeded is not None:
                            raise guard.failure()
                        yield output
    finally:  # the guard's thread is stopped (it signals at most once) before the handler goes
        if main:
            signal.signal(signal.SIGUSR1, before)


def _stop(workers: list[Any]) -> None:
    """Stop the workers still running: SIGTERM (they clean up), then SIGKILL after :data:`STOP_S`."""
    for process in workers:
        if process.is_alive():
            process.terminate()
    for process in workers:
        process.join(STOP_S)
        if process.is_alive():
            process.kill()
            process.join()


PRELOAD = ("numpy", "pyarrow", "pyarrow.parquet")
"""What every worker imports: imported here before the workers are forked (or by the fork server), once. Not Arrow's
compute functions (a third of pyarrow's import): the evicted rows of a plain store are read without them."""


def _parallel(work: Callable[[Any, Any], Generator[Any, None, None]], job: Any, tasks: Sequence[Any], jobs: int, fork: bool,
              workers: list[Any], guard: _Guard | None, scratch: str) -> Iterator[Any]:
    ctx: Any = multiprocessing.get_context("fork" if fork else "forkserver")
    if fork:
        for module in PRELOAD:
            importlib.import_module(module)
    else:
        ctx.set_forkserver_preload([*PRELOAD, work.__module__])
    todo: Any = ctx.Queue()
    for index, task in enumerate(tasks):
        todo.put((index, task))
    for _ in range(jobs):
        todo.put(None)
    results: Any = ctx.Queue(maxsize=2 * jobs)
    for _ in range(jobs):
        process = ctx.Process(target=_worker, args=(work, job, todo, results, scratch), daemon=True)
        process.start()
        workers.append(process)
    if guard is not None:
        guard.pids = [p.pid for p in workers]
    done: set[int] = set()
    failed: dict[int, BaseException] = {}
    while len(done) < len(tasks):
        first = min(failed, default=None)
        if first is not None and done >= set(range(first)):
            raise failed[first]
        if guard is not None and guard.exceeded is not None:
            raise guard.failure()
        try:
            kind, value = results.get(timeout=SAMPLE_S * 4)
        except queue.Empty:
            dead = [p for p in workers if p.exitcode not in (None, 0)]
            if guard is not None and guard.exceeded is not None:
                raise guard.failure() from None
            if dead:
                raise CheckpointError(f"a state worker process stopped (exit code {dead[0].exitcode})",
                                      hint=f"{arg('jobs', 1)} reads in this process") from None
            continue
        if kind == _OUT:
            yield value
        elif kind == _DONE:
            done.add(value)
        else:
            failed[value[0]] = value[1]


def _worker(work: Callable[[Any, Any], Generator[Any, None, None]], job: Any, todo: Any, results: Any, scratch: str) -> None:
    """A worker process: every task it takes, output by output, then ``done``; an error ends it. Its temporary
    files go into ``scratch``."""
    tempfile.tempdir = scratch
    def stopped(signum: int, _frame: Any) -> None:  # unwind (temporary files go) and exit, unflushed outputs dropped
        results.cancel_join_thread()
        sys.exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stopped)
    while (taken := todo.get()) is not None:
        index, task = taken
        try:
            for value in work(job, task):
                results.put((_OUT, value))
        except SystemExit:
            raise
        except BaseException as exc:  # handed to the consumer, who raises it
            results.put((_ERROR, (index, exc if _picklable(exc) else RuntimeError(f"{type(exc).__name__}: {exc}"))))
            return
        results.put((_DONE, index))


def _picklable(exc: BaseException) -> bool:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return False
    return True
