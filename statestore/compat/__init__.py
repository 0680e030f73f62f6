"""``wmcheck compat``: will new query code restart on a checkpoint, and what will it change (needs pyspark)."""
from .api import CompatOptions, compat
from .results import CompatReport, OutputChange, Refusal, SchemaChange, StateChange, WatermarkChange

__all__ = ["CompatOptions", "CompatReport", "OutputChange", "Refusal", "SchemaChange", "StateChange", "WatermarkChange",
           "compat"]
