"""``wmcheck reset-offsets``' request: which Kafka partitions move to which offsets, in ``kafka-consumer-groups
--reset-offsets``' words (``--to-datetime``, ``--by-duration``, ``--to-offset``, ``--shift-by``, ``--to-earliest``,
``--to-latest``, ``--from-file``), worked out against the broker where the words need it; planned by
:mod:`.reset_offsets`."""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from dataclasses import field
from typing import ClassVar, Mapping

from wmcheck.checkpoint.records import dataclass

from ..errors import CheckpointError, MalformedFileError, RefusedError, arg
from ..model import Checkpoint
from ..sources.kafka_topics import DEFAULT_TIMEOUT_S, KafkaTopics
from ..timeutil import parse_duration_ms, parse_time_ms
from .plan import Plan
from .plan_params import ResetParams
from .requests import FsOptions, SinksAsked, repair_sink
from .reset_offsets import Offsets, ResetTarget, kafka_source, plan_reset, select

SPECS = ("to_datetime", "by_duration", "to_offset", "shift_by", "to_earliest", "to_latest", "from_file", "offsets")
BROKER_SPECS = ("to_datetime", "by_duration", "to_earliest", "to_latest")
FLAGS = {"to_datetime": arg("to_datetime"), "by_duration": arg("by_duration"), "to_offset": arg("to_offset"),
         "shift_by": arg("shift_by"), "to_earliest": arg("to_earliest"), "to_latest": arg("to_latest"),
         "from_file": arg("from_file"), "offsets": arg("from_plan")}
"""Each spec's parameter, as a message names it (arg() takes literal names)."""
ISO_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE)


def parse_iso_or_spark_duration(text: str) -> int:
    """``PT2H30M`` / ``P1DT12H`` (Kafka's ``--by-duration``) or Spark's ``2 hours 30 minutes``, as milliseconds."""
    match = ISO_DURATION.fullmatch(text.strip())
    if match and text.strip().upper() not in ("P", "PT"):
        days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
        return int(round((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000))
    return parse_duration_ms(text)


def read_offsets_csv(text: str, path: str) -> Offsets:
    """``--from-file``: ``TOPIC,PARTITION,OFFSET`` per line (what ``--export`` writes; a leading group column, as
    ``kafka-consumer-groups`` writes for several groups, is ignored)."""
    out: Offsets = {}
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not "".join(row).strip():
            continue
        cells = [c.strip() for c in row][-3:]
        if number == 1 and [c.lower() for c in cells] == ["topic", "partition", "offset"]:
            continue  # the header --export writes
        if len(cells) < 3 or not cells[1].isdigit() or not re.fullmatch(r"-?\d+", cells[2]):
            raise MalformedFileError("expected TOPIC,PARTITION,OFFSET", path=path, line=number,
                                     hint="write it with wmcheck reset-offsets ... " + arg("export"))
        out[cells[0], int(cells[1])] = int(cells[2])
    if not out:
        raise MalformedFileError("expected TOPIC,PARTITION,OFFSET lines, found none", path=path,
                                 hint="write it with wmcheck reset-offsets ... " + arg("export"))
    return out


@dataclass(frozen=True)
class ResetOffsetsRequest(SinksAsked):
    """Start a Kafka source's partitions (``topic``: ``T`` or ``T:P,P`` each; none: all it reads) at new offsets: exactly
    one of the ``SPECS`` (``offsets``: Spark's Kafka offsets JSON, as a saved plan records them). ``bootstrap_server``
    (with ``kafka_options``) asks the broker, needed by ``BROKER_SPECS`` and to verify the offsets lie in the topic
    (a Kafka sink's counts come from the source's offsets: its broker is not asked)."""

    command: ClassVar[str] = "reset-offsets"
    source: str | None = None
    topic: tuple[str, ...] = ()
    to_datetime: str | None = None
    by_duration: str | None = None
    to_offset: int | None = None
    shift_by: int | None = None
    to_earliest: bool = False
    to_latest: bool = False
    from_file: str | None = None
    offsets: str | None = field(default=None, compare=False)
    """A saved plan's offsets (no flag: ``from_plan`` gives them)."""
    bootstrap_server: str | None = None
    kafka_options: Mapping[str, str] | None = field(default=None, compare=False)
    timeout_s: float = field(default=DEFAULT_TIMEOUT_S, compare=False)
    file_sink: str | None = None

    def plan(self, ckpt: Checkpoint, now: int, fs_options: FsOptions) -> Plan:
        from .sink_rereads import Rereads, reread_effects

        target = self.target(ckpt, now)
        plan = plan_reset(ckpt, target, repair_sink(self.file_sink, ckpt, fs_options), now)
        if not (self.delta_sink or self.kafka_sink or self.foreach_batch or self.file_sink):
            return plan
        moved = Rereads.of(int(ckpt.last_committed_batch or 0) + 2, target.current, target.new)
        effects = reread_effects(ckpt, moved, delta_sink=self.delta_sink, kafka_sink=self.kafka_sink,
                                 foreach_batch=self.foreach_batch, file_sink=plan.file_sink, fs_options=fs_options)
        return dataclasses.replace(plan, sinks=(*plan.sinks, *effects))

    def _given(self) -> list[str]:
        return [name for name in SPECS if getattr(self, name) not in (None, False)]

    def target(self, ckpt: Checkpoint, now: int) -> ResetTarget:
        """The new offsets, per partition (RefusedError where Spark cannot start from them)."""
        given = self._given()
        if len(given) != 1:
            names = ", ".join(FLAGS[n] for n in SPECS[:-1])
            raise CheckpointError(f"reset-offsets takes exactly one of {names}" + (
                f" (given: {', '.join(FLAGS[n] for n in given)})" if given else ""), param=given[1] if len(given) > 1
                else "to_offset", hint="e.g. " + arg("to_datetime", "2024-01-01T02:00:00Z"))
        spec = given[0]
        done = ckpt.last_committed_batch
        if done is None:
            raise RefusedError("no batch is committed yet: there is nothing to reset",
                               hint="start the query with the startingOffsets option instead")
        _, source = kafka_source(ckpt.offsets(done), self.source, done)
        current = {(t, p): o for t, parts in (source.kafka_offsets or {}).items() for p, o in parts.items()}
        chosen = select(current, self.topic)
        if spec in BROKER_SPECS and self.bootstrap_server is None:
            raise CheckpointError(f"{FLAGS[spec]} asks the broker: pass {arg('bootstrap_server', 'HOST:PORT')}",
                                  param="bootstrap_server", hint="the offline ones: " + ", ".join(
                                      FLAGS[n] for n in ("to_offset", "shift_by", "from_file")))
        broker = KafkaTopics(self.bootstrap_server, self.kafka_options, self.timeout_s) if self.bootstrap_server else None
        topics = broker.topics({t for t, _ in chosen}) if broker else None
        new = self._new_offsets(spec, chosen, broker, topics, now)
        late = late_records(ckpt, chosen, new, broker) if broker is not None and ckpt.operators else None
        return ResetTarget(source.source_id, chosen, new, self._how(spec), topics, late)

    def _how(self, spec: str) -> str:
        if spec == "offsets":
            return "the offsets of a saved plan"
        value = getattr(self, spec)
        return FLAGS[spec] if isinstance(value, bool) else FLAGS[spec].replace("}}", f"={value}}}}}")

    def _new_offsets(self, spec: str, chosen: Offsets, broker: KafkaTopics | None, topics, now: int) -> Offsets:
        if spec == "to_offset":
            return {tp: int(self.to_offset or 0) for tp in chosen}
        if spec == "shift_by":
            return {tp: o + int(self.shift_by or 0) for tp, o in chosen.items()}
        if spec in ("from_file", "offsets"):
            given = self._file_offsets() if spec == "from_file" else _json_offsets(self.offsets or "")
            stray = sorted(tp for tp in given if tp not in chosen)
            if stray:
                raise RefusedError(f"the source does not read partition {stray[0][1]} of {stray[0][0]}", param="from_file",
                                   hint="reset only partitions it reads (wmcheck batches lists them)")
            return given
        assert broker is not None and topics is not None
        if spec in ("to_earliest", "to_latest"):
            side = "earliest" if spec == "to_earliest" else "latest"
            out = {}
            for t, p in chosen:
                part = topics[t].offsets().get(p) if topics[t].exists else None
                if part is None:
                    raise RefusedError(f"topic {t} has no partition {p} on the broker", param="to_earliest",
                                       hint="wmcheck check --bootstrap-server tells what became of the topic")
                out[t, p] = getattr(part, side)
            return out
        if spec == "to_datetime":
            ms = parse_time_ms(str(self.to_datetime), now_ms=now)
        else:
            ms = now - parse_iso_or_spark_duration(str(self.by_duration))
        return broker.offsets_for_time(chosen, ms)

    def _file_offsets(self) -> Offsets:
        path = str(self.from_file)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise CheckpointError(f"cannot read {path}: {exc.strerror}", path=path, param="from_file",
                                  hint="pass the CSV written by " + arg("export")) from None
        return read_offsets_csv(text, path)

    @classmethod
    def from_plan(cls, plan: Plan) -> ResetOffsetsRequest:
        params = plan.params(ResetParams)
        from .sink_effects import asked_of

        return cls(source=params.source_id, offsets=params.offsets, file_sink=plan.file_sink,
                   **asked_of(plan))  # type: ignore[arg-type]

    def conflicts_with(self, plan: Plan) -> bool:
        return self.offsets is not None and plan.params(ResetParams).offsets != self.offsets


def late_records(ckpt: Checkpoint, current: Offsets, new: Offsets, broker: KafkaTopics) -> int:
    """How many records a reset reads again whose Kafka timestamp is at or before the watermark: those from the new
    offset to the first record stamped after the watermark (Spark drops rows at or before it as late)."""
    back = [tp for tp, o in new.items() if o < current[tp]]
    watermark = ckpt.watermark_ms
    if not back or watermark <= 0:
        return 0
    after = broker.offsets_for_time(back, watermark + 1)
    return sum(max(0, min(current[tp], after[tp]) - new[tp]) for tp in back)


def _json_offsets(text: str) -> Offsets:
    try:
        value = json.loads(text)
        return {(t, int(p)): int(o) for t, parts in value.items() for p, o in parts.items()}
    except (ValueError, AttributeError, TypeError):
        raise CheckpointError(f"expected Kafka offsets JSON {{topic: {{partition: offset}}}}, found {text[:60]!r}",
                              param="from_plan") from None
