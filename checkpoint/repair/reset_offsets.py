"""Planning ``wmcheck reset-offsets``: make the next batch of a query start a Kafka source at chosen offsets, in the
vocabulary of Kafka's ``kafka-consumer-groups --reset-offsets``.

Spark ignores ``startingOffsets`` once a checkpoint exists: a restart starts every source at the end offsets of the
last committed batch L. The reset writes batch L+1 as Spark's offline repartition writes one: ``offsets/L+1`` (L's,
with the Kafka source's partitions at the new offsets and the watermark the next batch uses), ``commits/L+1``, each
stateful operator's state version L+2 (version L+1 again: its increment or snapshot copied, so the state is kept) and,
with ``--file-sink``, the sink log's entry for L+1 (no files). The restarted query then runs batch L+2 from the new
offsets. Undo (or ``rewind --to-batch L``) removes batch L+1 again.
"""
from __future__ import annotations

import json

from wmcheck.checkpoint.logs.commits import serialize_commit
from wmcheck.checkpoint.logs.file_logs import FileLog, serialize_file_log
from wmcheck.checkpoint.logs.kafka_offsets import kafka_json
from wmcheck.checkpoint.logs.metadata_log import COMMIT_LOG, FILE_SINK_LOG, OFFSET_LOG, MetadataLog
from wmcheck.checkpoint.logs.offsets import OffsetSeq, serialize_offsets
from wmcheck.checkpoint.logs.source_offsets import SourceOffset
from wmcheck.checkpoint.records import dataclass

from ..errors import CheckpointError, RefusedError, arg
from ..model import Checkpoint
from ..sources.kafka_topics import TopicState
from .logs import read_parsed
from .plan import Plan, SourcePosition, Step, rewrite_step
from .plan_params import Position, ResetParams
from .rewind import FileSink

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]
UNCOPIED_OPERATORS = ("transformWithStateExec", "transformWithStateInPandasExec", "transformWithStateInPySparkExec")
"""Operators whose state increments are not idempotent (list state appends by merge): version L+1's changes cannot
be applied a second time to make version L+2."""


@dataclass(frozen=True)
class ResetTarget:
    """The offsets one reset asks for, by partition, worked out (from the broker where the spec needs it)."""

    source_id: str
    current: Offsets
    new: Offsets
    how: str
    topics: dict[str, TopicState] | None
    """The topics as the broker holds them (None: planned offline, not verified against the topic)."""
    late: int | None = None
    """Of the records read again, how many have a Kafka timestamp at or before the watermark (None: not asked)."""


def kafka_source(seq: OffsetSeq, source: str | None, batch: int) -> tuple[int, SourceOffset]:
    """The Kafka source of ``offsets/batch`` to reset: ``source`` (its id or index), or the only Kafka source."""
    kafka = [(i, s) for i, s in enumerate(seq.sources) if s.kafka_offsets is not None]
    if source is not None:
        found = [(i, s) for i, s in enumerate(seq.sources) if source in (s.source_id, str(i))]
        if not found:
            raise CheckpointError(f"offsets/{batch} has no source {source!r}", param="source",
                                  hint="the sources are " + ", ".join(s.source_id for s in seq.sources))
        if found[0][1].kafka_offsets is None:
            raise RefusedError(f"source {source} is a {found[0][1].kind} source, not a Kafka source", param="source",
                               hint="reset-offsets moves Kafka sources; wmcheck rewind moves every source back")
        return found[0]
    if not kafka:
        raise RefusedError(f"offsets/{batch} has no Kafka source",
                           hint="reset-offsets moves Kafka sources; wmcheck rewind moves every source back")
    if len(kafka) > 1:
        raise CheckpointError("the query reads several Kafka sources: name one with " + arg("source", "ID"),
                              hint="its Kafka sources are " + ", ".join(s.source_id for _, s in kafka), param="source")
    return kafka[0]


def select(current: Offsets, topics: tuple[str, ...]) -> Offsets:
    """The partitions of ``current`` that ``topics`` names (``T`` or ``T:P,P``; none given: all of them)."""
    if not topics:
        return dict(current)
    out: Offsets = {}
    for spec in topics:
        name, _, parts = spec.partition(":")
        known = sorted(p for t, p in current if t == name)
        if not known:
            read = sorted({t for t, _ in current})
            raise RefusedError(f"the source does not read topic {name!r}", param="topic",
                               hint="it reads " + ", ".join(read))
        try:
            wanted = [int(p) for p in parts.split(",")] if parts else known
        except ValueError:
            raise CheckpointError(f"expected TOPIC or TOPIC:PARTITION,PARTITION..., found {spec!r}", param="topic",
                                  hint="e.g. " + arg("topic", f"{name}:0,1")) from None
        for p in wanted:
            if (name, p) not in current:
                raise RefusedError(f"the source does not read partition {p} of {name} (offsets name partitions "
                                   f"{', '.join(map(str, known))})", param="topic",
                                   hint="a partition the topic gained since is read from its earliest offset anyway")
            out[name, p] = current[name, p]
    return out


def check_range(target: ResetTarget) -> list[str]:
    """Why the new offsets cannot be started from (refusals), checked against the topics where they were asked."""
    out = [f"offset {o} of {t}/{p} is negative" for (t, p), o in sorted(target.new.items()) if o < 0]
    if target.topics is None:
        return out
    for (t, p), o in sorted(target.new.items()):
        state = target.topics.get(t)
        if state is None or not state.exists:
            out.append(f"topic {t} does not exist on the broker")
            continue
        part = state.offsets().get(p)
        if part is None:
            out.append(f"topic {t} has no partition {p} on the broker")
        elif o > part.latest:
            out.append(f"offset {o} of {t}/{p} is beyond the topic's end ({part.latest}): Spark fails on it")
        elif o < part.earliest:
            out.append(f"offset {o} of {t}/{p} is below the earliest offset the broker retains ({part.earliest}): "
                       "Spark fails (failOnDataLoss=true) or skips to the earliest")
    return out


def plan_reset(ckpt: Checkpoint, target: ResetTarget, sink: FileSink | None, created_ms: int) -> Plan:
    """The plan that writes batch L+1 so that the next batch starts ``target``'s source at its new offsets. A batch
    L+1 planned but not committed (a restart that failed, on offsets the topic no longer holds, say) is replaced:
    its offsets, and whatever state version L+2 it wrote, are rewritten (the originals kept in the backup)."""
    last, done = ckpt.last_batch, ckpt.last_committed_batch
    if done is None or last is None:
        raise RefusedError("no batch is committed yet: there is nothing to reset",
                           hint="start the query with the startingOffsets option instead")
    batch = done + 1
    if last > batch:
        raise RefusedError(f"batches {batch}..{last} are planned but not committed (wmcheck check: WM005)",
                           hint=f"wmcheck rewind CKPT --to-batch {done} first")
    problems = check_range(target) + _pending_problems(ckpt, batch, sink)
    if problems:
        raise RefusedError(f"cannot reset: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1
                           else ""), hint="; ".join(problems[1:3]) or "pick offsets within the topic",
                           param="to_offset")
    if last == done and all(o == target.current[tp] for tp, o in target.new.items()):
        return _unchanged(ckpt, target, sink, created_ms)
    commit = ckpt.commit(done)
    if commit.state_unique_ids is not None:
        raise RefusedError("the checkpoint is in state checkpoint format 2 (commits name each state version's unique "
                           "id): reset-offsets cannot write its state versions", hint="wmcheck rewind moves it back")
    seq = ckpt.offsets(done)
    index, source = kafka_source(seq, target.source_id, done)
    merged = {t: dict(ps) for t, ps in (source.kafka_offsets or {}).items()}
    for (t, p), o in target.new.items():
        merged[t][p] = o
    raw = json.dumps(kafka_json(merged), separators=(",", ":"))
    sources = tuple(SourceOffset(s.source_id, raw) if i == index else s for i, s in enumerate(seq.sources))
    watermark = ckpt.watermark_ms
    assert seq.metadata is not None
    new_seq = OffsetSeq(seq.version, seq.metadata.with_watermark(watermark), sources)
    steps = [
        write_step(ckpt, OFFSET_LOG.path(batch), serialize_offsets(new_seq), "offsets",
                   f"batch {batch} ends at the new offsets"),
        write_step(ckpt, COMMIT_LOG.path(batch), serialize_commit(commit.with_watermark(watermark)), "commits",
                   f"batch {batch} is committed (it reads nothing)"),
        *state_copy_steps(ckpt, batch),
        *([sink_entry(sink, batch)] if sink else []),
    ]
    moved = {tp: o for tp, o in target.new.items() if o != target.current[tp]}
    positions = tuple(SourcePosition(source.source_id, "kafka", f"{t}/{p}", str(target.current[t, p]), str(o))
                      for (t, p), o in sorted(target.new.items()))
    replaced = ([f"batch {batch} was planned but not committed (a restart that failed): its offsets and the state it "
                 "wrote are replaced, the originals kept in the backup"] if last == batch else [])
    return Plan(
        "reset-offsets", ckpt.location, sink.location if sink else None,
        ResetParams(source.source_id, json.dumps(_nested(target.new), separators=(",", ":")), batch),
        Position(last, done, watermark_ms=watermark),
        Position(batch, batch, next_batch=batch + 1, watermark_ms=watermark, next_state_version=batch + 1),
        tuple(steps), tuple(_warnings(ckpt, target, sink)), created_ms,
        notes=(f"batch {batch + 1} starts source {source.source_id} at the new offsets ({len(moved)} of "
               f"{len(target.new)} partition(s) move, {target.how})",
               f"wmcheck writes batch {batch}: offsets/{batch}, commits/{batch}"
               + (", state version " + str(batch + 1) + " of every operator (version " + str(batch) + " again)"
                  if ckpt.operators else "") + (f", _spark_metadata/{batch}" if sink else ""), *replaced),
        sources=positions,
    )


def _unchanged(ckpt: Checkpoint, target: ResetTarget, sink: FileSink | None, created_ms: int) -> Plan:
    """The plan of a reset to where the next batch starts already: nothing to write (so a reset run again after it
    finished changes nothing)."""
    done = ckpt.last_committed_batch
    assert done is not None
    position = Position(done, done, watermark_ms=ckpt.watermark_ms)
    return Plan("reset-offsets", ckpt.location, sink.location if sink else None,
                ResetParams(target.source_id, json.dumps(_nested(target.new), separators=(",", ":")), done + 1),
                position, position, (), (), created_ms,
                notes=("the next batch starts at these offsets already: nothing to write",),
                sources=tuple(SourcePosition(target.source_id, "kafka", f"{t}/{p}", str(o), str(o))
                              for (t, p), o in sorted(target.new.items())))


def write_step(ckpt: Checkpoint, path: str, data: bytes, phase: str, reason: str) -> Step:
    """Give ``path`` of the checkpoint ``data``: a new file, or a rewrite of what a failed batch left there."""
    if ckpt.fs.info(path) is not None:
        return rewrite_step(ckpt.fs, path, data, phase, reason + " (replacing the failed batch's)")
    return Step("write", "checkpoint", path, phase, reason, None, None, None, data, True, None)


def _pending_problems(ckpt: Checkpoint, batch: int, sink: FileSink | None) -> list[str]:
    """What a planned, uncommitted ``batch`` wrote that a reset cannot replace: the sink's log entry (its output is
    published) or a file source's log entry."""
    out = []
    if sink is not None and MetadataLog.listed(sink.fs, FILE_SINK_LOG.directory).covered(batch):
        out.append(f"the sink's log already holds batch {batch}, which is not committed: wmcheck rewind CKPT "
                   f"--to-batch {batch - 1} with the file sink first")
    for i in ckpt.source_dirs:
        if batch in ckpt.metadata_log(f"sources/{i}").files:
            out.append(f"batch {batch} is planned and its file source {i} logged its files: wmcheck rewind CKPT "
                       f"--to-batch {batch - 1} first")
    return out


def _nested(offsets: Offsets) -> dict[str, dict[str, int]]:
    out: dict[str, dict[int, int]] = {}
    for (t, p), o in offsets.items():
        out.setdefault(t, {})[p] = o
    return kafka_json(out)


def _warnings(ckpt: Checkpoint, target: ResetTarget, sink: FileSink | None) -> list[str]:
    out = []
    back = sum(target.current[tp] - o for tp, o in target.new.items() if o < target.current[tp])
    ahead = sum(o - target.current[tp] for tp, o in target.new.items() if o > target.current[tp])
    if back and ckpt.operators:
        out.append(f"{back} record(s) are read again while the state is kept: an aggregation counts them a second time, "
                   "a deduplication drops them, and rows behind the watermark are dropped as late; wmcheck rewind "
                   f"{arg('to_time', 'TIME')} restores the state of that time too")
        if target.late:
            out.append(f"{target.late} of them have a Kafka timestamp at or before the watermark "
                       f"({ckpt.watermark_ms}): where the query's event time is the record's timestamp, an operator that "
                       "drops late rows by it (a deduplication, a join, withWatermark's filter) drops them; a window "
                       "aggregation drops only those whose window ended by the watermark")
    elif back:
        out.append(f"{back} record(s) are read again and written to the sink a second time")
    if ahead:
        out.append(f"{ahead} record(s) are skipped: the query never reads them")
    if target.topics is None:
        out.append(f"not verified against the topic (offline): pass {arg('bootstrap_server', 'HOST:PORT')} to check "
                   "the new offsets lie within what the broker retains")
    if sink is None:
        out.append(f"no {arg('file_sink')} given: a file sink's log gets no entry for the new batch, and its next "
                   "compaction fails (wmcheck check --file-sink: WM036); pass the sink where the query writes files")
    return out


def state_copy_steps(ckpt: Checkpoint, version: int) -> list[Step]:
    """Version ``version + 1`` of every store partition (rewritten where a failed batch wrote it), the same as
    ``version``: its increment (delta or changelog)
    applied again changes nothing, a snapshot is the same snapshot (Hadoop sidecars regenerated)."""
    steps = []
    for op in ckpt.operators:
        if op.name in UNCOPIED_OPERATORS:
            raise RefusedError(f"operator {op.operator_id} is {op.name}: its state changes cannot be applied twice, so "
                               "reset-offsets cannot write its next state version", hint="wmcheck rewind moves it back")
        for part in op.partitions:
            files = [f for f in part.files if f.version == version]
            if not files:
                raise RefusedError(f"state version {version} of operator {op.operator_id} partition {part.partition} "
                                   f"({part.store}) has no file to copy", path=part.directory,
                                   hint="wmcheck check tells why the state is incomplete")
            for f in files:
                if f.unique_id is not None:
                    raise RefusedError(f"{f.path} is named by a unique id (state checkpoint format 2)",
                                       hint="wmcheck rewind moves the query back")
                name = f.path.rsplit("/", 1)[-1]
                new = f"{f.path.rsplit('/', 1)[0]}/{version + 1}{name[len(str(version)):]}"
                steps.append(write_step(ckpt, new, ckpt.fs.read(f.path), "state",
                                        f"version {version + 1}: version {version} again"))
    return steps


def sink_entry(sink: FileSink, batch: int) -> Step:
    """The file sink log's entry of a batch that writes no file: ``N`` (the version line alone), or on a compaction
    batch ``N.compact`` holding every entry Spark would compact into it."""
    log = MetadataLog.listed(sink.fs, FILE_SINK_LOG.directory)
    name = log.name_of(batch)
    reason = f"batch {batch} writes no output: the sink log needs its entry"
    if not name.endswith(".compact"):
        return Step("write", "sink", log.path(name), "sink", reason, None, None, None, b"v1", True, None)
    read = read_parsed(sink.fs)
    entries = [e for path in log.restart_files for e in read(path).entries]
    data = serialize_file_log(FileLog(1, tuple(entries)))
    return Step("write", "sink", log.path(name), "sink", reason + " (a compaction batch: every entry so far)",
                None, None, None, data, True, None)
