"""Checks of each Kafka source's offsets against the topics as the broker holds them now (``check --bootstrap-server``):
where the next batch starts (the end offsets of the last committed batch) and where a pending batch ends. Without a
broker they do not run, and one note says so."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from wmcheck.checkpoint.logs.kafka_offsets import DATA_LOST as SPARK_DATA_LOST
from wmcheck.checkpoint.logs.metadata_log import OFFSET_LOG
from wmcheck.checkpoint.records import dataclass
from wmcheck.checkpoint.sources.kafka import KAFKA_LIVE

from .context import Context
from .definition import ERROR, WARNING, Instruction, Issue, check
from .text import plural

if TYPE_CHECKING:
    from ..repair.reset_request import ResetOffsetsRequest
    from ..sources.kafka_topics import KafkaTopics, TopicState

OFFLINE_NOTE = KAFKA_LIVE.note()
DATA_LOST = f"'{SPARK_DATA_LOST}'"


@dataclass(frozen=True)
class KafkaOffsetsNow:
    """The Kafka offsets of one source that the restart reads from, with the topics as they are now."""

    batch: int
    """The offsets file the offsets come from (the last committed batch's, else the pending one's)."""
    start: dict[tuple[str, int], int]
    """Where the next batch starts (the last committed batch's end offsets)."""
    pending: dict[tuple[str, int], int]
    """Where the pending batch Spark re-runs ends (empty without one)."""
    topics: dict[str, TopicState]
    new_topics: tuple[str, ...] = ()
    """Topics that match the source's ``subscribePattern`` (when given) and that the offsets do not name yet."""


def kafka_offsets_now(ctx: Context) -> list[KafkaOffsetsNow]:
    """Each Kafka source's offsets and its topics now (asked once per check); none without ``ctx.kafka``, with a note
    where the checkpoint has a Kafka source."""
    return ctx.once(_kafka_offsets_now)


def _kafka_offsets_now(ctx: Context) -> list[KafkaOffsetsNow]:
    ckpt = ctx.ckpt
    done, pending = ckpt.last_committed_batch, ckpt.pending_batch
    base = ctx.offsets.get(done) if done is not None else None
    ahead = ctx.offsets.get(pending) if pending is not None else None
    found = []
    first = base if base is not None else ahead
    for index, src in enumerate(first.sources if first is not None else ()):
        if src.kafka_offsets is None:
            continue
        later = ahead.sources[index] if ahead is not None and index < len(ahead.sources) else None
        start = flat(src.kafka_offsets) if base is not None else {}
        found.append((start, flat(later.kafka_offsets) if later is not None and later.kafka_offsets is not None else {}))
    out: list[KafkaOffsetsNow] = []
    if found and ctx.kafka is None:
        ctx.notes.append(OFFLINE_NOTE)
    elif found and ctx.kafka is not None:
        read = {t for start, end in found for t, _ in (*start, *end)}
        pattern = ctx.kafka.subscribe_pattern
        matching = set(ctx.kafka.matching(pattern)) if pattern is not None else set()
        topics = ctx.kafka.topics(read | matching)
        batch = done if done is not None else pending
        for start, end in found:
            named = {t for t, _ in (*start, *end)}
            # the pattern is the source's when every topic it read matches it
            new = tuple(sorted(matching - named)) if named and named <= matching else ()
            out.append(KafkaOffsetsNow(int(batch or 0), start, end, topics, new))
    return out


def flat(offsets: dict[str, dict[int, int]] | None) -> dict[tuple[str, int], int]:
    return {(t, p): o for t, parts in (offsets or {}).items() for p, o in parts.items()}


def names(parts: list[tuple[str, int]]) -> str:
    return ", ".join(f"{t}[{p}]" for t, p in sorted(parts))


def reset_to_earliest(ctx: Context, kafka: KafkaTopics, parts: list[tuple[str, int]]) -> ResetOffsetsRequest:
    """The reset of ``parts`` to the earliest offsets the broker retains."""
    from ..repair.reset_request import ResetOffsetsRequest  # the repair's module: imported only for a finding

    topics = sorted({t for t, _ in parts})
    specs = tuple(f"{t}:{','.join(str(p) for tt, p in sorted(parts) if tt == t)}" for t in topics)
    return ResetOffsetsRequest(topic=specs, to_earliest=True, bootstrap_server=kafka.bootstrap,
                               kafka_options=kafka.options, timeout_s=kafka.timeout_s, file_sink=ctx.sink_location)


def live(ctx: Context, src: KafkaOffsetsNow, tp: tuple[str, int]):
    """The partition as the broker holds it now (None: the topic or the partition is gone)."""
    state = src.topics.get(tp[0])
    return state.offsets().get(tp[1]) if state is not None and state.exists else None


@check("WM081", ERROR, "Kafka offsets below the earliest the broker retains")
def offsets_aged_out(ctx: Context) -> Iterator[Issue]:
    for src in kafka_offsets_now(ctx):
        below = {tp: (o, now) for tp, o in src.start.items() if (now := live(ctx, src, tp)) is not None
                 and now.earliest > o and o <= now.latest}
        if not below or ctx.kafka is None:
            continue
        lost = sum(min(now.earliest, src.pending.get(tp, now.earliest)) - o for tp, (o, now) in below.items())
        detail = "; ".join(f"{t}[{p}] starts at {o}, the broker keeps {now.earliest} on"
                           for (t, p), (o, now) in sorted(below.items()))
        yield Issue(OFFSET_LOG.path(src.batch), (
            f"the next batch starts below what the broker retains ({detail}): with failOnDataLoss true (the default) "
            f"Spark fails ({DATA_LOST}, partitions {names(list(below))}); with failOnDataLoss false it skips "
            f"{plural(lost, 'record')} without a word (tested with Spark 4.2). Resetting to the earliest makes the "
            "skip explicit and the restart work"), reset_to_earliest(ctx, ctx.kafka, list(below)))


@check("WM082", ERROR, "a Kafka topic the source reads no longer exists")
def topic_gone(ctx: Context) -> Iterator[Issue]:
    for src in kafka_offsets_now(ctx):
        gone = sorted({t for t, _ in (*src.start, *src.pending) if not src.topics[t].exists})
        for topic in gone:
            yield Issue(OFFSET_LOG.path(src.batch), (
                f"the source reads topic {topic}, which the broker no longer has: Spark fails whatever failOnDataLoss "
                "says ('UnknownTopicOrPartitionException: This server does not host this topic-partition', tested "
                "with Spark 4.2)"), Instruction(
                    f"re-create topic {topic} (then check again: WM083 tells where Spark starts in it), or start the "
                    "query from a new checkpoint"))


@check("WM083", ERROR, "Kafka offsets beyond the topic's end (the topic deleted and re-created)")
def offsets_beyond_end(ctx: Context) -> Iterator[Issue]:
    for src in kafka_offsets_now(ctx):
        beyond = {tp: (o, now) for tp, o in {**src.start, **src.pending}.items()
                  if (now := live(ctx, src, tp)) is not None and o > now.latest}
        if not beyond or ctx.kafka is None:
            continue
        skipped = sum(now.latest - now.earliest for _, now in beyond.values())
        detail = "; ".join(f"{t}[{p}] at {o}, the topic ends at {now.latest}" for (t, p), (o, now) in sorted(beyond.items()))
        yield Issue(OFFSET_LOG.path(src.batch), (
            f"the offsets lie beyond the end of the topic, which was deleted and re-created ({detail}): with "
            f"failOnDataLoss true (the default) Spark fails ({DATA_LOST}); with failOnDataLoss false it skips the "
            f"{plural(skipped, 'record')} the new topic holds there (tested with Spark 4.2). The reset to the earliest "
            "reads the new topic from its start"), reset_to_earliest(ctx, ctx.kafka, list(beyond)))


@check("WM084", ERROR, "Kafka partitions the source reads are gone")
def partitions_gone(ctx: Context) -> Iterator[Issue]:
    for src in kafka_offsets_now(ctx):
        gone = sorted(tp for tp in {**src.start, **src.pending} if src.topics[tp[0]].exists and live(ctx, src, tp) is None)
        if not gone:
            continue
        yield Issue(OFFSET_LOG.path(src.batch), (
            f"{plural(len(gone), 'partition')} the source reads {'is' if len(gone) == 1 else 'are'} gone "
            f"({names(gone)}; the topic was re-created with fewer): with failOnDataLoss true (the default) Spark fails "
            f"({DATA_LOST}); with failOnDataLoss false it drops them and reads the others on (tested with Spark 4.2)"),
            Instruction("restart the query once with the source option failOnDataLoss=false (it drops the partitions "
                        "that are gone), or start it from a new checkpoint"))


@check("WM088", WARNING, "Kafka partitions (or topics matching its subscribePattern) the source has not read yet")
def partitions_added(ctx: Context) -> Iterator[Issue]:
    for src in kafka_offsets_now(ctx):
        known = {**src.start, **src.pending}
        added = {(t, p.partition): p for t in {t for t, _ in known} | set(src.new_topics) if src.topics[t].exists
                 for p in src.topics[t].partitions if (t, p.partition) not in known}
        if not added:
            continue
        records = sum(p.latest - p.earliest for p in added.values())
        from_zero = all(p.earliest == 0 for p in added.values())
        grown = sorted(tp for tp in added if tp[0] not in src.new_topics)
        what = [f"{plural(len(grown), 'partition')} {'was' if len(grown) == 1 else 'were'} added since the offsets were "
                f"written ({names(grown)})"] if grown else []
        if src.new_topics:
            what.append(f"{plural(len(src.new_topics), 'topic')} matching the source's subscribePattern "
                        f"{'is' if len(src.new_topics) == 1 else 'are'} new ({', '.join(src.new_topics)}: "
                        f"{names(sorted(tp for tp in added if tp[0] in src.new_topics))})")
        yield Issue(OFFSET_LOG.path(src.batch), (
            f"{' and '.join(what)}: the next batch reads {'it' if len(added) == 1 else 'them'} from the earliest offset "
            f"the broker retains, {plural(records, 'record')} now" + (" (tested with Spark 4.2: every record once)"
                                                                      if from_zero else
                                                                      ", where records before it are gone: not tested")),
            Instruction("nothing to do if the records of the new partitions belong to the query; to skip them, "
                        "reset the new partitions with wmcheck reset-offsets once the next batch has run"))
