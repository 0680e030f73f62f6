"""Spark's refusal of a new query, translated: the operator, the store, the field that changed (old and new
schema side by side), the source added or removed, the rule of Spark's guide that applies, or the new code's own
exception on the batch's rows.

Pure text work on Spark's error (its condition and message) and the checkpoint's own schema files.
"""
from __future__ import annotations

import re
from typing import Iterator

from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.model import Checkpoint
from wmcheck.checkpoint.operator_kinds import is_join, is_transform_with_state
from wmcheck.checkpoint.records import dataclass
from wmcheck.statestore.formats.schema import ColumnFamilySchema, parse_state_schema
from wmcheck.statestore.spark.compat.results import FieldChange, OperatorChange, Refusal, Rule, SchemaChange
from wmcheck.statestore.spark.compat.schemas import Fields, parse_struct_text, render, side_by_side, struct_fields

GUIDE = ("https://spark.apache.org/docs/latest/streaming/apis-on-dataframes-and-datasets.html"
         "#recovery-semantics-after-changes-in-a-streaming-query")
TWS_GUIDE = ("https://spark.apache.org/docs/latest/streaming/structured-streaming-transform-with-state.html"
             "#state-schema-evolution")
STATEFUL_RULE = Rule("Changes in stateful operations: any change (addition, deletion, or schema modification) to the "
                     "stateful operations of a streaming query is not allowed between restarts.", GUIDE)
FILES_RULE = Rule("Changes in the parameters of input sources: changes to subscribed topics/files are generally not "
                  "allowed as the results are unpredictable.", GUIDE)
SOURCES_RULE = Rule("Changes in the number or type (i.e. different source) of input sources: not allowed.", GUIDE)
TWS_RULE = Rule("transformWithState evolves only the value side of a state variable, and only with "
                "spark.sql.streaming.stateStore.encodingFormat=avro: adding, removing, widening or reordering fields "
                "is supported; renaming a field and narrowing a type are not; a key schema cannot change.", TWS_GUIDE)
OPERATOR_RULES = {
    "aggregation": Rule("Streaming aggregation: any change in number or type of grouping keys or aggregates is not "
                        "allowed.", GUIDE),
    "deduplication": Rule("Streaming deduplication: any change in number or type of deduplicating columns is not "
                          "allowed.", GUIDE),
    "join": Rule("Stream-stream join: changes in the schema or equi-joining columns are not allowed; changes in join "
                 "type (outer or inner) are not allowed; other changes in the join condition are ill-defined.", GUIDE),
    "arbitrary": Rule("Arbitrary stateful operation: any change to the schema of the user-defined state and the type "
                      "of timeout is not allowed.", GUIDE),
}
KINDS = {"stateStoreSave": "aggregation", "sessionWindowStateStoreSaveExec": "aggregation", "dedupe": "deduplication",
         "dedupeWithinWatermark": "deduplication", "symmetricHashJoin": "join",
         "flatMapGroupsWithState": "arbitrary", "applyInPandasWithState": "arbitrary"}
STREAM_FAILED = "STREAM_FAILED"
INTERNAL_FAMILY = "$"
"""transformWithState's own column families start with it (``$rowCounter_<var>``, ``$ttl_<var>``, timers)."""
_PLAN_DUMP = "\n=== Streaming Query ==="
_SCHEMA_ERROR = re.compile(r"(Existing|new|old) (key|value)_schema=")
_OPERATOR = re.compile(r"\(OperatorId: (\d+) -> OperatorName: ([^)]+)\)")
_BASE_PATH = re.compile(r"Wrong basePath (\S+) for the root path: (\S+)")
_SOURCES = re.compile(r"There are \[(\d+)\] sources in the checkpoint offsets and now there are \[(\d+)\] sources")
_PYTHON_TRACEBACK = "Traceback (most recent call last):"
_PYTHON_FRAME = re.compile(r'^ *File "([^"]+)", line (\d+), in (.+)$', re.M)
_ENGINE_CODE = ("/pyspark/", "/py4j/")


@dataclass(frozen=True)
class SparkFailure:
    """Spark's failure as reported: the most specific error condition in the cause chain (else the failing
    Java class), its message, and every message of the chain."""

    error_class: str
    message: str
    chain: tuple[str, ...] = ()


def clean_message(text: str) -> str:
    """Spark's message without the query dump and the repeated ``SQLSTATE`` tail."""
    text = text.split(_PLAN_DUMP, 1)[0].strip()
    return re.sub(r"(\s*SQLSTATE: \w+)+$", "", text)


def kind_of(operator: str | None, stores: tuple[str, ...] = ()) -> str | None:
    """``aggregation``, ``deduplication``, ``join``, ``arbitrary`` or ``transformWithState``."""
    if is_transform_with_state(operator):
        return "transformWithState"
    if is_join(operator, stores):
        return "join"
    return KINDS.get(operator or "")


def rule_for(kind: str | None) -> Rule:
    if kind == "transformWithState":
        return TWS_RULE
    return OPERATOR_RULES.get(kind or "", STATEFUL_RULE)


def _balanced(text: str, start: int) -> str:
    """The ``Name(...)`` starting at ``start``, parentheses balanced."""
    depth = 0
    for at in range(start, len(text)):
        if text[at] == "(":
            depth += 1
        elif text[at] == ")":
            depth -= 1
            if depth == 0:
                return text[start:at + 1]
    return text[start:]


def schemas_in(message: str) -> tuple[str, Fields, Fields] | None:
    """``(key|value, old fields, new fields)`` of a schema error's message."""
    found: dict[str, Fields] = {}
    part = ""
    for match in _SCHEMA_ERROR.finditer(message):
        fields = parse_struct_text(_balanced(message, match.end()))
        if fields is None:
            return None
        found["new" if match[1] == "new" else "old"] = fields
        part = match[2]
    if "old" not in found or "new" not in found:
        return None
    return part, found["old"], found["new"]


def store_schemas(ckpt: Checkpoint) -> Iterator[tuple[int, str | None, str, ColumnFamilySchema]]:
    """(operator id, operator name, store, column family schema) of every store's newest schema file."""
    for op in ckpt.operators:
        for store in op.stores:
            paths = ckpt.schema_file_paths(op.operator_id, store)
            if not paths:
                continue
            try:
                families = ckpt.parse(paths[0], parse_state_schema).column_families
            except CheckpointError:
                continue
            for family in families:
                yield op.operator_id, op.name, store, family


def _summary(changes: tuple[FieldChange, ...]) -> str:
    parts = []
    for f in changes:
        if f.change == "added":
            parts.append(f"added {f.name} {f.new}")
        elif f.change == "removed":
            parts.append(f"removed {f.name} {f.old}")
        else:
            parts.append(f"{f.name}: {f.old} -> {f.new}")
    return "; ".join(parts) or "the same fields in another order"


def _schema_refusal(ckpt: Checkpoint, failure: SparkFailure, message: str) -> Refusal | None:
    found = schemas_in(message)
    if found is None:
        return None
    part, old, new = found
    found_in = [(op_id, name, store, cf) for op_id, name, store, cf in store_schemas(ckpt)
                if struct_fields(cf.key_schema if part == "key" else cf.value_schema) == old]
    # Spark's own column families ($rowCounter_..., $ttl_..., timers) never change with user code: prefer the user's
    found_in.sort(key=lambda m: m[3].name.startswith(INTERNAL_FAMILY))
    match = found_in[0] if found_in else None
    op_id, name, store, family = match if match else (None, None, None, None)
    where = part if family is None or family.name == "default" else f"{part} of {family.name}"
    change = SchemaChange(op_id, store, where, side_by_side(old, new), render(old), render(new))
    kind = kind_of(name, (store,) if store else ())
    who = f"operator {op_id} ({name}{', ' + kind if kind and kind != name else ''})" if op_id is not None else "a stateful operator"
    held = {"key": "keys its state by", "value": "stores per key"}[part]
    store_text = f", store {store}" if store and store != "default" else ""
    family_text = f", state variable {family.name}" if family is not None and family.name != "default" else ""
    explanation = (f"{who}{store_text}{family_text} {held} ({render(old)}); the new query's is ({render(new)}): "
                   f"{_summary(change.changed)}. Spark refuses to load state whose {part} schema changed this way")
    rule = TWS_RULE if failure.error_class == "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION" else rule_for(kind)
    return Refusal(failure.error_class, message, explanation, op_id, name, store, change, rule=rule)


def _operator_refusal(failure: SparkFailure, message: str) -> Refusal | None:
    head, sep, tail = message.partition("Stateful operators in current batch:")
    if not sep:
        return None
    old = {int(i): n.strip() for i, n in _OPERATOR.findall(head)}
    new = {int(i): n.strip() for i, n in _OPERATOR.findall(tail)}
    changes = tuple(OperatorChange(i, old.get(i), new.get(i)) for i in sorted(old.keys() | new.keys()) if old.get(i) != new.get(i))
    words = []
    for c in changes:
        if c.old is None:
            words.append(f"the new query adds operator {c.operator_id} ({c.new})")
        elif c.new is None:
            words.append(f"the new query has no operator {c.operator_id} ({c.old})")
        else:
            words.append(f"operator {c.operator_id} was {c.old} and is {c.new} in the new query")
    listed = ", ".join(f"{i} {n}" for i, n in sorted(old.items())) or "none"
    explanation = (f"the checkpoint's stateful operators are [{listed}]; " + "; ".join(words or ["they differ"]) +
                   ". Spark matches operators by id and refuses a query whose stateful operators changed")
    return Refusal(failure.error_class, message, explanation, operators=changes, rule=STATEFUL_RULE)


def _sources_refusal(failure: SparkFailure, message: str) -> Refusal | None:
    match = _SOURCES.search(message)
    if match is None:
        return None
    old, new = int(match[1]), int(match[2])
    what = f"adds {new - old} source(s)" if new > old else f"removes {old - new} source(s)"
    explanation = (f"the checkpoint records offsets of {old} source(s) and the new query reads {new}: it {what}. "
                   "Spark matches sources by position and cannot continue")
    return Refusal(failure.error_class, message, explanation, sources=(old, new), rule=SOURCES_RULE)


def _python_refusal(failure: SparkFailure, message: str) -> Refusal | None:
    """The new code's own Python function (a UDF, a stateful processor) raised on the batch's rows: the exception in
    one line, with the innermost frame of the user's code."""
    head, sep, trace = message.replace("\\n", "\n").partition(_PYTHON_TRACEBACK)
    if not sep:
        return None
    frames = [m for m in _PYTHON_FRAME.finditer(trace) if not any(part in m[1] for part in _ENGINE_CODE)]
    last = list(_PYTHON_FRAME.finditer(trace))
    after = trace[last[-1].end():] if last else trace
    raised = next((line.strip() for line in after.splitlines() if line.strip() and not line.startswith(" ")), "an exception")
    where = f" (at {frames[-1][1]}:{frames[-1][2]}, in {frames[-1][3]})" if frames else ""
    explanation = (f"the new code raised {raised}{where} while Spark ran the batch: a restart fails the same way on "
                   "these rows")
    return Refusal(failure.error_class, f"{head.strip()} {raised}{where}".strip(), explanation)


def _path_refusal(failure: SparkFailure, message: str) -> Refusal | None:
    match = _BASE_PATH.search(message)
    if match is None:
        return None
    explanation = (f"a file source now reads {match[1]}, but on restart Spark reads files its log recorded (those of "
                   f"the batch it re-runs, or of the last committed batch, which the source restores its position "
                   f"from), such as {match[2]}, which are not under it: Spark reads a batch's files relative to the "
                   "source path and refuses others")
    return Refusal(failure.error_class, message, explanation, rule=FILES_RULE)


def explain(ckpt: Checkpoint, failure: SparkFailure) -> Refusal:
    """Spark's failure as a :class:`Refusal`, translated where wmcheck knows the error."""
    message = clean_message(failure.message)
    for translate in (lambda: _python_refusal(failure, message), lambda: _schema_refusal(ckpt, failure, message),
                      lambda: _operator_refusal(failure, message),
                      lambda: _sources_refusal(failure, message), lambda: _path_refusal(failure, message)):
        found = translate()
        if found is not None:
            return found
    if "output mode" in message.lower():
        return Refusal(failure.error_class, message, "the sink does not accept the new query's output mode (Spark checks "
                       "the output mode against the sink and the query's operators when the query starts)")
    return Refusal(failure.error_class, message, "Spark failed to run the batch with the new query; its message says why")
