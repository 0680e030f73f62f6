"""Where replayed batches go: Parquet partitioned by batch id (``--output``), or a function (``--foreach-batch``)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping

from wmcheck.checkpoint.errors import CheckpointError, RefusedError, arg
from wmcheck.checkpoint.fs import open_fs
from wmcheck.statestore.spark.spark_errors import first_line, spark_errors
from wmcheck.statestore.spark.user_code import load_callable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

Sink = Callable[["DataFrame", int], None]


class ParquetSink:
    """``--output``: every batch's rows with a ``batch_id`` column, written as Parquet partitioned by it.

    The batches are collected and written by one Spark job on :meth:`close` (a write per batch costs
    a job and a commit each); a non-empty directory is refused unless ``overwrite``.
    """

    def __init__(self, path: str, overwrite: bool = False, fs_options: Mapping[str, str] | None = None) -> None:
        target = open_fs(path, fs_options)
        info = target.info("")
        if info is not None and not info.is_dir:
            raise RefusedError(f"{arg('output')} {path} is a file", hint="pass a directory", param="output")
        if target.names("") and not overwrite:
            raise RefusedError(f"{arg('output')} {path} is not empty", param="output",
                               hint=f"pass an empty or new directory, or {arg('overwrite')} to replace it")
        self.path = path
        self.batches: list["DataFrame"] = []

    def __call__(self, df: "DataFrame", batch_id: int) -> None:
        from pyspark.sql import functions as F

        self.batches.append(df.withColumn("batch_id", F.lit(batch_id).cast("long")))

    def close(self) -> None:
        if not self.batches or self.batches[0].columns == ["batch_id"]:
            return  # nothing was read and no schema was given: no rows to write
        union = self.batches[0]
        for df in self.batches[1:]:
            union = union.unionByName(df)
        with spark_errors(f"writing {self.path}"):
            (union.write.mode("overwrite").option("partitionOverwriteMode", "static")
             .partitionBy("batch_id").parquet(self.path))


def load_function(spec: str) -> Sink:
    """``module:function`` or ``path/to/file.py:function`` -> the function (called as ``function(df, batch_id)``)."""
    fn = load_callable(spec, "foreach_batch", "mypackage.sinks:write_batch")

    def call(df: "DataFrame", batch_id: int) -> None:
        try:
            fn(df, batch_id)
        except Exception as exc:
            raise CheckpointError(f"{arg('foreach_batch', spec)} failed on batch {batch_id}: {type(exc).__name__}: "
                                  f"{first_line(exc)}", hint=f"{arg('debug')} shows the traceback") from exc

    return call
