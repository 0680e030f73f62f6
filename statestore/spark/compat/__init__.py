"""``wmcheck compat``: will new query code restart on a checkpoint, and what will it change (needs pyspark)."""
from wmcheck.statestore.spark.compat.api import CompatOptions, Prepared, compat, prepare, run
from wmcheck.statestore.spark.compat.results import (
           CompatReport,
           OutputChange,
           Refusal,
           SchemaChange,
           StateChange,
           WatermarkChange,
)

__all__ = ["CompatOptions", "CompatReport", "Prepared", "prepare", "run", "OutputChange", "Refusal", "SchemaChange", "StateChange", "WatermarkChange",
           "compat"]
