"""The new query: the user's function called, what its writer and plan say (sink, output mode, sources,
watermarks), and one batch of it run on the scratch copy with its sink pointed there.

The function's writer is never started as the user wrote it: its ``checkpointLocation`` becomes the scratch
copy, a file sink's ``path`` the scratch sink (which holds a copy of the sink log), any other sink (a
foreachBatch function, Kafka, a table) is replaced by a function that captures the batch, and the trigger
becomes a single batch.
"""
from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Mapping

from wmcheck.checkpoint.errors import CheckpointError, UnsupportedError, arg
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.spark.compat.explain import STREAM_FAILED, SparkFailure, clean_message
from wmcheck.statestore.spark.compat.methods import replaced
from wmcheck.statestore.spark.compat.params import named
from wmcheck.statestore.spark.compat.plan import STREAMING_RELATIONS, plan_nodes, relations
from wmcheck.statestore.spark.user_code import user_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter

    from wmcheck.statestore.spark.compat.substitute import BatchRows

FILE_FORMATS = ("parquet", "json", "csv", "orc", "text", "avro", "xml")
WATERMARK_DELAY_KEY = "spark.watermarkDelayMs"
CAPTURED, CAPTURED_SCHEMA = "captured", "captured.schema.json"
DEFAULT_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class SinkSpec:
    """The new query's sink: ``format`` as the writer names it (``parquet``, ``foreachBatch``, ``kafka``...),
    its ``path`` for a file sink, and the output mode."""

    format: str
    path: str | None
    output_mode: str

    @property
    def is_file(self) -> bool:
        return self.format.lower() in FILE_FORMATS


@dataclass(frozen=True)
class SourceSpec:
    """A source of the new query, in the order Spark numbers them: its format, paths and options."""

    source_id: str
    format: str
    paths: tuple[str, ...]
    options: tuple[tuple[str, str], ...]
    schema: str | None
    """The user-given schema as Spark's JSON, None when inferred."""


@dataclass(frozen=True)
class WatermarkSpec:
    """A ``withWatermark`` of the new query, one per node in plan order (pre-order, left to right): its column and
    delay, and the sources under it (their ids as Spark numbers them)."""

    column: str
    delay_ms: int
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class NewQuery:
    """The user's query as built by their function."""

    spec: str
    df: "DataFrame"
    writer: "DataStreamWriter"
    sink: SinkSpec
    sources: tuple[SourceSpec, ...]
    watermarks: tuple[WatermarkSpec, ...]


@dataclass(frozen=True)
class BatchRun:
    """One batch of the new query: the batches it ran and the failure, if any; ``captured`` is where a
    non-file sink's batch was written (Parquet)."""

    batches: tuple[int, ...]
    failure: SparkFailure | None
    captured: str | None


WRITER_STARTS = ("start", "toTable")
"""``DataStreamWriter`` methods that start a query (on the user's own checkpoint)."""


def _starts_refused(spec: str, param: str) -> ContextManager[None]:
    """While the user's function runs, a writer that would start its query raises instead: started, it would run on
    the checkpoint itself, which compat only reads."""
    from pyspark.sql.streaming import DataStreamWriter

    def refuse(name: str) -> Callable:
        def call(*_args: Any, **_kwargs: Any) -> None:
            which = "old" if param == "baseline" else "new"
            raise CheckpointError(f"{named(param, spec)} called DataStreamWriter.{name}(): compat does not start the "
                                  f"{which} query on the checkpoint; it runs the writer on a copy", param=param,
                                  hint="return the writer (or the streaming DataFrame) without starting it")

        return call

    return replaced(DataStreamWriter, WRITER_STARTS, refuse)


def call_query(spark: "SparkSession", fn: Callable, spec: str, param: str = "query") -> Any:
    """``fn(spark)``, its writer's starts refused; what it raises becomes one line naming the exception, where in
    the user's code, and the parameter that named the code (``query``: the new code, ``baseline``: the old)."""
    try:
        with _starts_refused(spec, param):
            return fn(spark)
    except CheckpointError:
        raise
    except Exception as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise CheckpointError(f"{named(param, spec)} raised {type(exc).__name__}{': ' + text if text else ''} "
                              f"(at {user_frame(exc)})", param=param, hint=f"{arg('debug')} shows the traceback") from exc


def _private(obj: Any, name: str) -> Any:
    """A private field of a JVM object (the writer keeps its sink and options there)."""
    field = obj.getClass().getDeclaredField(name)
    field.setAccessible(True)
    return field.get(obj)


def _scala_map(spark: "SparkSession", value: Any) -> dict[str, str]:
    java = spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(value)  # type: ignore[union-attr]
    return {str(k): str(v) for k, v in dict(java).items()}


def _sources(spark: "SparkSession", nodes: list[Any]) -> tuple[SourceSpec, ...]:
    out: list[SourceSpec] = []
    for node in nodes:
        name = node.nodeName()
        if name == "StreamingRelation":
            source = node.dataSource()
            given = source.userSpecifiedSchema()
            paths = source.paths()
            options = _scala_map(spark, source.options())
            found = [str(paths.apply(i)) for i in range(paths.size())] or ([options["path"]] if "path" in options else [])
            out.append(SourceSpec(str(len(out)), str(source.className()), tuple(found),
                                  tuple(sorted((k, v) for k, v in options.items() if k != "path")),
                                  str(given.get().json()) if given.isDefined() else None))
        elif name in STREAMING_RELATIONS:
            out.append(SourceSpec(str(len(out)), name, (), (), None))
    return tuple(out)


def _watermarks(nodes: list[Any]) -> tuple[WatermarkSpec, ...]:
    """Each EventTimeWatermark node's column and delay (Spark's own ``spark.watermarkDelayMs`` of its output column),
    with the sources of its subtree: in pre-order a node's subtree is the run of nodes after it."""
    is_source = [n.nodeName() in STREAMING_RELATIONS for n in nodes]
    out: list[WatermarkSpec] = []
    for at, node in enumerate(nodes):
        if node.nodeName() != "EventTimeWatermark":
            continue
        column = str(node.eventTime().name())
        size = len(plan_nodes(node))
        sources = tuple(str(sum(is_source[:i])) for i in range(at, at + size) if is_source[i])
        for field in json.loads(node.schema().json())["fields"]:
            delay = field.get("metadata", {}).get(WATERMARK_DELAY_KEY)
            if field["name"] == column and isinstance(delay, int):
                out.append(WatermarkSpec(column, delay, sources))
                break
    return tuple(out)


def _frame(got: Any) -> Any:
    return getattr(got, "_df", got)


def build(spark: "SparkSession", fn: Callable, spec: str, file_sink_format: str | None = None,
          rows: "Mapping[str, BatchRows] | None" = None, param: str = "query", same_reader: bool = False) -> NewQuery:
    """Call the user's function and read its query: a streaming DataFrame (written to a file sink of
    ``file_sink_format`` when given, else captured, in append mode) or a ``DataStreamWriter``; the sources of
    ``rows`` read those rows instead (:mod:`.substitute`; ``same_reader``: with the user's reader, over their
    location). Errors name ``param``, the parameter that gave the code."""
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import DataStreamWriter

    from wmcheck.statestore.spark.compat.substitute import build_with

    if rows:
        got = build_with(spark, lambda: call_query(spark, fn, spec, param), rows,
                         lambda built: relations(_frame(built)._jdf.queryExecution().analyzed()), same_reader,
                         "next_inputs" if same_reader else "inputs")
    else:
        got = call_query(spark, fn, spec, param)
    if isinstance(got, DataFrame):
        if not got.isStreaming:
            raise CheckpointError(f"{named(param, spec)} returned a DataFrame that is not streaming", param=param,
                                  hint="return the query's spark.readStream... DataFrame or its df.writeStream writer")
        writer = got.writeStream.outputMode("append")
        if file_sink_format:
            writer = writer.format(file_sink_format)
        df = got
    elif isinstance(got, DataStreamWriter):
        writer, df = got, got._df
    else:
        raise CheckpointError(f"{named(param, spec)} returned {type(got).__name__}", param=param,
                              hint="return the new query's streaming DataFrame or its DataStreamWriter (not a started query)")
    jwrite = getattr(writer, "_jwrite", None)
    if jwrite is None:
        raise UnsupportedError("compat needs a classic Spark session (Spark Connect writers keep their sink on the server)",
                               hint="run wmcheck compat with a local or cluster master, not a remote")
    options = _scala_map(spark, _private(_private(jwrite, "extraOptions"), "originalMap"))
    mode = str(_private(jwrite, "outputMode").toString()).lower()
    sink = SinkSpec(str(_private(jwrite, "source")), options.get("path"), mode)
    nodes = plan_nodes(df._jdf.queryExecution().analyzed())
    return NewQuery(spec, df, writer, sink, _sources(spark, nodes), _watermarks(nodes))


def failure_of(exc: BaseException) -> SparkFailure:
    """Spark's error as one condition and message: the most specific condition in the JVM cause chain
    (``STREAM_FAILED`` only wraps), else the root cause's Java class (e.g. ``java.lang.AssertionError``)."""
    java = getattr(exc, "_origin", None) or getattr(exc, "java_exception", None)
    chain: list[tuple[str, str, str]] = []
    try:
        while java is not None:
            try:
                cond = java.getCondition() or ""
            except Exception:  # noqa: BLE001 - not a SparkThrowable
                cond = ""
            chain.append((str(java.getClass().getName()), str(cond), str(java.getMessage() or "")))
            java = java.getCause()
    except Exception:  # noqa: BLE001 - the chain is a bonus; the Python error stands alone
        pass
    specific = [c for c in chain if c[1] and c[1] != STREAM_FAILED]
    if specific:
        _, cond, message = specific[-1]
    elif chain and len(chain) > 1:
        cond, _, message = chain[-1]
    else:
        getter = getattr(exc, "getCondition", None)
        cond = (getter() if getter else None) or type(exc).__name__
        message = str(exc)
    return SparkFailure(cond, clean_message(message), tuple(clean_message(m) for _, _, m in chain) or (str(exc),))


def _capture(target: str) -> Callable[["DataFrame", int], None]:
    def capture(df: "DataFrame", batch_id: int) -> None:
        with open(os.path.join(target, CAPTURED_SCHEMA), "w") as out:
            out.write(df.schema.json())
        df.write.mode("append").parquet(os.path.join(target, CAPTURED))  # every batch run (one, or all available)

    return capture


def run_batch(query: NewQuery, checkpoint: str, sink_dir: str | None, scratch_root: str,
              timeout_s: float = DEFAULT_TIMEOUT_S, available: bool = False) -> BatchRun:
    """Run the new query for exactly one batch on the scratch copy ``checkpoint`` (with ``available``, every batch a
    restart runs on the input there now, and the no-data batch after it, as ``availableNow``); a run that takes longer
    than ``timeout_s`` is stopped, and is an error (not a verdict)."""
    writer = query.writer.option("checkpointLocation", checkpoint)
    captured = None
    if query.sink.is_file and sink_dir is not None:
        writer = writer.option("path", sink_dir)
    else:
        captured = scratch_root
        writer = writer.foreachBatch(_capture(scratch_root))
    writer = writer.trigger(availableNow=True) if available else writer.trigger(once=True)
    handle = None
    try:
        handle = writer.start()
        if not handle.awaitTermination(int(timeout_s)):
            handle.stop()
            raise CheckpointError(f"the new code's batch did not finish within {timeout_s:g} s; compat stopped it",
                                  param="timeout_s", hint=f"give it longer with {arg('timeout_s', 'SECONDS')}, or look "
                                  "for a stuck task or a slow function in the new code")
        return BatchRun(_batches(handle), None, captured)
    except Exception as exc:  # noqa: BLE001 - whatever Spark raises is the verdict
        if isinstance(exc, CheckpointError):
            raise
        return BatchRun(_batches(handle) if handle is not None else (), failure_of(exc), captured)
    finally:
        if handle is not None and handle.isActive:
            handle.stop()
        sys.stderr.flush()


def _batches(handle: Any) -> tuple[int, ...]:
    out = []
    for progress in handle.recentProgress:
        data = json.loads(progress.json) if hasattr(progress, "json") else progress
        out.append(int(data["batchId"]))
    return tuple(out)
