"""Tasks run in parallel worker processes, their outputs streamed back as they come, under a memory budget.

:func:`run` calls ``work(job, task)`` for every task and yields what it yields. With one job (or one
task) it runs in this process; else ``jobs`` worker processes take tasks from a queue and put each
output on a bounded queue (a worker waits while the consumer is behind, so memory holds a few
outputs, not a task's whole result). Workers are forked when the checkpoint is local (they share what
this process has imported) and started by a fork server otherwise (a process that has not touched a
remote file system's client threads). An error in a worker stops them all and is raised here.

The memory budget (``max_memory`` bytes) is the resident memory of this process and its workers,
sampled every 50 ms: past it the workers are stopped and the main thread is interrupted; :func:`run`
raises one CheckpointError naming the budget instead of the KeyboardInterrupt (a caller that was
running its own code at that moment gets the interrupt: :func:`memory_failure` then says why).
"""
from __future__ import annotations

import _thread
import multiprocessing
import os
import pickle
import queue
import threading
from typing import Any, Callable, Iterator, Sequence

from wmcheck.checkpoint.errors import CheckpointError, arg

SAMPLE_S = 0.05
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_DONE, _OUT, _ERROR = "done", "out", "error"
_FAILED: list[CheckpointError] = []


def default_jobs() -> int:
    """Every core this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def available_memory() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def resident(pid: int) -> int:
    """Resident memory of process ``pid`` in bytes (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


class _Guard:
    """Samples the resident memory of this process and ``pids`` in a thread; past the budget it stops the
    workers (``on_exceed``) and interrupts the main thread, which :meth:`failure` then explains."""

    def __init__(self, limit: int | None, on_exceed: Callable[[], None]) -> None:
        self.limit, self.on_exceed = limit, on_exceed
        self.pids: list[int] = []
        self.exceeded: int | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True) if limit is not None else None

    def __enter__(self) -> "_Guard":
        if self.thread is not None:
            self._used()
            if self.exceeded is not None:  # already over it: fail before any work
                raise self.failure()
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()

    def _used(self) -> int:
        used = resident(os.getpid()) + sum(resident(p) for p in list(self.pids))
        if self.limit is not None and used > self.limit:
            self.exceeded = used
        return used

    def _watch(self) -> None:
        assert self.limit is not None
        while not self.stop.wait(SAMPLE_S):
            if self._used() > self.limit:
                _FAILED[:] = [self.failure()]
                self.on_exceed()
                _thread.interrupt_main()
                return

    def failure(self) -> CheckpointError:
        assert self.limit is not None and self.exceeded is not None
        return CheckpointError(f"stopped: wmcheck and its workers used {self.exceeded >> 20} MiB of memory, over "
                               f"{arg('max_memory', self.limit >> 20)} MiB", param="max_memory",
                               hint=f"raise {arg('max_memory')}, or use fewer {arg('jobs')} (each worker holds a chunk of a partition)")


def memory_failure() -> CheckpointError | None:
    """Why the main thread was last interrupted by a memory budget (None when it never was)."""
    return _FAILED[0] if _FAILED else None


def run(work: Callable[[Any, Any], Iterator[Any]], job: Any, tasks: Sequence[Any], jobs: int = 1,
        max_memory: int | None = None, fork: bool = True) -> Iterator[Any]:
    """Everything ``work(job, task)`` yields for each of ``tasks`` (in the order outputs arrive), using up to
    ``jobs`` processes; ``work`` and ``job`` must be picklable unless ``fork``."""
    workers: list[Any] = []

    def stop_workers() -> None:
        for process in workers:
            if process.is_alive():
                process.kill()

    guard = _Guard(max_memory, stop_workers)
    _FAILED.clear()
    try:
        with guard:
            if jobs <= 1 or len(tasks) <= 1:
                for task in tasks:
                    yield from work(job, task)
            else:
                yield from _parallel(work, job, tasks, min(jobs, len(tasks)), fork, workers, guard)
    except KeyboardInterrupt:
        if guard.exceeded is None:
            raise
        raise guard.failure() from None
    finally:
        stop_workers()
        for process in workers:
            process.join()


def _parallel(work: Callable[[Any, Any], Iterator[Any]], job: Any, tasks: Sequence[Any], jobs: int, fork: bool,
              workers: list[Any], guard: _Guard) -> Iterator[Any]:
    ctx: Any = multiprocessing.get_context("fork" if fork else "forkserver")
    todo: Any = ctx.Queue()
    for task in tasks:
        todo.put(task)
    for _ in range(jobs):
        todo.put(None)
    results: Any = ctx.Queue(maxsize=2 * jobs)
    for _ in range(jobs):
        process = ctx.Process(target=_worker, args=(work, job, todo, results), daemon=True)
        process.start()
        workers.append(process)
    guard.pids = [p.pid for p in workers]
    done = 0
    while done < len(tasks):
        try:
            kind, value = results.get(timeout=SAMPLE_S * 4)
        except queue.Empty:
            dead = [p for p in workers if p.exitcode not in (None, 0)]
            if dead:
                raise CheckpointError(f"a state worker process stopped (exit code {dead[0].exitcode})",
                                      hint=f"{arg('jobs', 1)} reads in this process") from None
            continue
        if kind == _OUT:
            yield value
        elif kind == _DONE:
            done += 1
        else:
            raise value


def _worker(work: Callable[[Any, Any], Iterator[Any]], job: Any, todo: Any, results: Any) -> None:
    """A worker process: every task it takes, output by output, then ``done``; an error ends it."""
    while (task := todo.get()) is not None:
        try:
            for value in work(job, task):
                results.put((_OUT, value))
        except BaseException as exc:  # handed to the consumer, who raises it
            results.put((_ERROR, exc if _picklable(exc) else RuntimeError(f"{type(exc).__name__}: {exc}")))
            return
        results.put((_DONE, None))


def _picklable(exc: BaseException) -> bool:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return False
    return True
