"""Parsers of the text logs, on bytes: offsets, commits, metadata, file logs, source offsets."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wmcheck.checkpoint.errors import CheckpointError, MalformedFileError, NewerVersionError
from wmcheck.checkpoint.layout import log_file_batch
from wmcheck.checkpoint.logs.commits import CommitEntry, parse_commit, serialize_commit
from wmcheck.checkpoint.logs.file_logs import parse_file_log, serialize_file_log
from wmcheck.checkpoint.logs.offsets import BatchMetadata, OffsetSeq, parse_offsets, serialize_offsets
from wmcheck.checkpoint.logs.query_metadata import parse_query_metadata
from wmcheck.checkpoint.logs.source_offsets import SourceOffset

OFFSETS_V1 = (
    b'v1\n{"batchWatermarkMs":5000,"batchTimestampMs":1531292029003,"conf":'
    b'{"spark.sql.shuffle.partitions":"5","spark.sql.streaming.multipleWatermarkPolicy":"min"}}\n{"logOffset":3}\n-'
)


def test_metadata_conf_is_validated_unless_spark_wrote_it():
    """A metadata line in Spark's key order with a conf of plain strings is read without a full parse; any other conf
    is parsed and checked at once, as json4s reads it (a Map[String, String]: numbers taken, a boolean fails)."""
    for line in (b'{"batchWatermarkMs":1,"batchTimestampMs":2,"conf":[1]}', b'{"batchTimestampMs":2,"batchWatermarkMs":1,"conf":[1]}'):
        with pytest.raises(MalformedFileError, match="offsets/3: line 2: expected conf to be a JSON object"):
            parse_offsets(b"v1\n" + line, "offsets/3")
    with pytest.raises(MalformedFileError, match='offsets/3: line 2: expected conf a to be a string, found true'):
        parse_offsets(b'v1\n{"batchWatermarkMs":1,"batchTimestampMs":2,"conf":{"a":true}}', "offsets/3")
    seq = parse_offsets(b'v1\n{"batchWatermarkMs":1,"batchTimestampMs":2,"conf":{"a":3,"b":"x"}}', "offsets/3")
    assert seq.metadata.conf == {"a": 3, "b": "x"}
    assert "fields" in seq.metadata.__dict__
    seq = parse_offsets(b'v1\n{"batchWatermarkMs":1,"batchTimestampMs":2,"conf":{"a":"3","b":"x"}}', "offsets/3")
    assert "fields" not in seq.metadata.__dict__ and seq.metadata.conf == {"a": "3", "b": "x"}


def test_offsets_v1_fields_and_sources():
    seq = parse_offsets(OFFSETS_V1, "offsets/4")
    assert seq.version == 1
    assert seq.metadata.batch_watermark_ms == 5000
    assert seq.metadata.batch_timestamp_ms == 1531292029003
    assert seq.metadata.conf == {"spark.sql.shuffle.partitions": "5", "spark.sql.streaming.multipleWatermarkPolicy": "min"}
    assert seq.sources == (SourceOffset("0", '{"logOffset":3}'), SourceOffset("1", None))
    assert seq.sources[0].kind == "file" and seq.sources[0].log_offset == 3
    assert seq.sources[1].kind == "none"


def test_offsets_roundtrip_is_byte_exact():
    assert serialize_offsets(parse_offsets(OFFSETS_V1, "offsets/4")) == OFFSETS_V1


def test_offsets_blank_and_missing_metadata():
    assert parse_offsets(b"v1\n\n7", "offsets/0") == OffsetSeq(1, None, (SourceOffset("0", "7"),))
    assert parse_offsets(b"v1", "offsets/0") == OffsetSeq(1, None, ())


def test_offsets_spark_21_without_conf():
    seq = parse_offsets(b'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1489085905815}\n2', "offsets/0")
    assert seq.metadata.conf == {} and seq.sources[0].kind == "long" and seq.sources[0].log_offset == 2


def test_offsets_v2_source_ids_and_void():
    data = b'v2\n{"batchWatermarkMs":1,"batchTimestampMs":2,"version":2,"sourceMetadataInfo":{"a":1}}\nsrc-a:{"logOffset":1}\nsrc-b:-'
    seq = parse_offsets(data, "offsets/1")
    assert seq.version == 2
    assert seq.sources == (SourceOffset("src-a", '{"logOffset":1}'), SourceOffset("src-b", None))
    assert seq.metadata.fields["sourceMetadataInfo"] == {"a": 1}
    assert serialize_offsets(seq) == data


def test_offsets_with_watermark_keeps_key_order():
    seq = parse_offsets(OFFSETS_V1, "offsets/4")
    changed = OffsetSeq(seq.version, seq.metadata.with_watermark(1000), seq.sources)
    assert serialize_offsets(changed) == OFFSETS_V1.replace(b'"batchWatermarkMs":5000', b'"batchWatermarkMs":1000')


@pytest.mark.parametrize(
    ("data", "error", "text"),
    [
        (b"", MalformedFileError, "offsets/7: file is empty"),
        (b"v99\n{}", NewerVersionError, 'offsets/7: line 1 is "v99": written by a newer Spark than wmcheck knows (up to v2)'),
        (b"x1\n{}", MalformedFileError, 'offsets/7: line 1: line 1 is "x1": expected a offsets log version header'),
        (b"v1\n{not json", MalformedFileError, "offsets/7: line 2: expected the batch metadata as JSON"),
        (b"v1\n[1,2]", MalformedFileError, "offsets/7: line 2: expected the batch metadata as a JSON object, found list"),
        (b'v1\n{"batchWatermarkMs":"x"}', MalformedFileError, "offsets/7: line 2: expected batchWatermarkMs to be an integer"),
        (b"v1\n\xff\xfe", MalformedFileError, "offsets/7: byte 3: not UTF-8 text"),
        (b"v2\n{}\nno-colon", MalformedFileError, "offsets/7: line 3: expected sourceId:offset"),
    ],
)
def test_offsets_errors_name_file_line_and_hint(data, error, text):
    with pytest.raises(error) as info:
        parse_offsets(data, "offsets/7")
    assert str(info.value).startswith(text)
    assert info.value.hint


def test_commit_versions():
    assert parse_commit(b"v1\n{}", "commits/1") == CommitEntry(1, {}, None, None)
    assert parse_commit(b"v1", "commits/1") == CommitEntry(1, {}, None, None)
    entry = parse_commit(b'v1\n{"nextBatchWatermarkMs":1717622989519}', "commits/5")
    assert entry.next_batch_watermark_ms == 1717622989519 and entry.state_unique_ids is None
    v2 = parse_commit(b'v2\n{"nextBatchWatermarkMs":0,"stateUniqueIds":{"0":[["a","b"],["c","d"]]}}', "commits/0")
    assert v2.version == 2 and v2.state_unique_ids == {"0": (("a", "b"), ("c", "d"))}
    v3 = parse_commit(b'v3\n{"nextBatchWatermarkMs":7,"sinkMetadataMap":{"x":1}}', "commits/0")
    assert v3.fields["sinkMetadataMap"] == {"x": 1} and v3.next_batch_watermark_ms == 7


def test_a_null_watermark_or_timestamp_reads_as_spark_s_default():
    """json4s gives a null its field's default (restart oracle: SILENT json-null-watermarks); a field without one stays
    an error."""
    meta = parse_offsets(b'v1\n{"batchWatermarkMs":null,"batchTimestampMs":null,"conf":{}}\n{"logOffset":3}', "offsets/7").metadata
    assert (meta.batch_watermark_ms, meta.batch_timestamp_ms) == (0, 0)
    assert parse_commit(b'v1\n{"nextBatchWatermarkMs":null}', "commits/7").next_batch_watermark_ms is None
    with pytest.raises(MalformedFileError, match='expected batchId to be an integer \\(a Java long\\), found null'):
        parse_file_log(b'v1\n{"path":"file:/a","timestamp":1,"batchId":null}', "sources/0/7")


@pytest.mark.parametrize("digits, value", [
    ("99999999999999999999", 7766279631452241919), ("9999999999999999999", -8446744073709551617),
    ("-9223372036854775809", 9223372036854775807), ("123456789012345678", 123456789012345678),
])
def test_an_integer_beyond_a_long_reads_as_json4s_reads_it(digits, value):
    """BigInt.longValue, its low 64 bits (restart oracle: SILENT json-huge-watermarks-in-processing-time)."""
    data = f'v1\n{{"batchWatermarkMs":{digits},"batchTimestampMs":1,"conf":{{}}}}\n{{"logOffset":3}}'.encode()
    assert parse_offsets(data, "offsets/7").metadata.batch_watermark_ms == value
    assert parse_commit(f'v1\n{{"nextBatchWatermarkMs":{digits}}}'.encode(), "commits/7").next_batch_watermark_ms == value


def test_a_leading_zero_is_malformed_as_jackson_finds_it():
    with pytest.raises(MalformedFileError, match="offsets/7: line 2: expected the batch metadata as JSON"):
        parse_offsets(b'v1\n{"batchWatermarkMs":01,"batchTimestampMs":1,"conf":{}}\n{"logOffset":3}', "offsets/7")


def test_commit_errors():
    with pytest.raises(NewerVersionError, match=r"commits/3: line 1 is \"v4\""):
        parse_commit(b"v4\n{}", "commits/3")
    with pytest.raises(MalformedFileError, match="stateUniqueIds"):
        parse_commit(b'v2\n{"stateUniqueIds":{"0":[1]}}', "commits/3")
    with pytest.raises(MalformedFileError, match="commits/3: file is empty"):
        parse_commit(b"", "commits/3")


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_commit_watermark_roundtrip(watermark):
    entry = parse_commit(b'v1\n{"nextBatchWatermarkMs":0}', "commits/0").with_watermark(watermark)
    assert parse_commit(serialize_commit(entry), "commits/0") == entry


@given(
    st.integers(min_value=0, max_value=2**62),
    st.integers(min_value=0, max_value=2**62),
    st.dictionaries(st.text(min_size=1, max_size=20), st.text(max_size=20), max_size=4),
    st.lists(st.one_of(st.none(), st.integers(0, 10**9).map(str), st.just('{"t":{"0":5}}')), max_size=4),
)
def test_offsets_roundtrip_property(wm, ts, conf, sources):
    fields = {"batchWatermarkMs": wm, "batchTimestampMs": ts, "conf": conf}
    seq = OffsetSeq(1, BatchMetadata.from_fields(fields), tuple(SourceOffset(str(i), s) for i, s in enumerate(sources)))
    assert parse_offsets(serialize_offsets(seq), "offsets/0") == seq


def test_query_metadata_compact_and_pretty():
    assert parse_query_metadata(b'{"id":"ccaf96d0-9b51"}').query_id == "ccaf96d0-9b51"
    assert parse_query_metadata(b'{\n  "id" : "abc"\n}\n').query_id == "abc"
    with pytest.raises(MalformedFileError, match='metadata: line 1: expected an "id" string'):
        parse_query_metadata(b'{"name":"x"}')


def test_file_source_log_and_compact_names():
    data = b'v1\n{"path":"file:///in/a.json","timestamp":1,"batchId":0}\n{"path":"file:///in/b.json","timestamp":2,"batchId":1}'
    log = parse_file_log(data, "sources/0/2.compact")
    assert [(e.path, e.batch_id) for e in log.entries] == [("file:///in/a.json", 0), ("file:///in/b.json", 1)]
    assert serialize_file_log(log) == data
    assert log_file_batch("2.compact") == (2, True) and log_file_batch("7") == (7, False) and log_file_batch(".7.crc") is None


def test_file_sink_log_actions():
    data = b'v1\n{"path":"/a/b/0","size":1,"isDir":false,"modificationTime":1,"blockReplication":1,"blockSize":100,"action":"delete"}'
    entry = parse_file_log(data, "_spark_metadata/9").entries[0]
    assert entry.action == "delete" and entry.batch_id is None and entry.fields["size"] == 1


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ('{"logOffset":12}', "file"),
        ("345", "long"),
        ('{"topic-0":{"0":1,"1":20}}', "kafka"),
        ('{"sourceVersion":1,"reservoirId":"x","reservoirVersion":3,"index":-1,"isStartingVersion":false}', "delta"),
        ('{"something":"else"}', "unknown"),
        ("not json", "unknown"),
        (None, "none"),
    ],
)
def test_source_offset_kinds(raw, kind):
    assert SourceOffset("0", raw).kind == kind


def test_kafka_offsets_summary():
    src = SourceOffset("0", '{"t":{"1":20,"0":5}}')
    assert src.kafka_offsets == {"t": {0: 5, 1: 20}}
    assert src.summary() == "t[0]=5, t[1]=20"


PARSERS = [
    (parse_offsets, "offsets/0"),
    (parse_commit, "commits/0"),
    (parse_file_log, "sources/0/0"),
    (lambda d, p: parse_query_metadata(d, p), "metadata"),
]


@settings(max_examples=300)
@given(st.binary(max_size=200), st.sampled_from(PARSERS))
def test_fuzz_only_checkpoint_errors(data, parser):
    fn, path = parser
    try:
        fn(data, path)
    except CheckpointError as exc:
        assert path in str(exc)


@settings(max_examples=200)
@given(st.text(max_size=120), st.sampled_from(PARSERS))
def test_fuzz_text_after_valid_header(text, parser):
    fn, path = parser
    header = b"" if path == "metadata" else b"v1\n"
    try:
        fn(header + text.encode("utf-8"), path)
    except CheckpointError as exc:
        assert path in str(exc)


def test_huge_line_is_reported_not_crashed():
    data = b'v1\n{"batchWatermarkMs":' + b"9" * 5_000_000 + b"}"
    with pytest.raises(MalformedFileError, match=r"offsets/0: line 2: expected the batch metadata as JSON.*digits"):
        parse_offsets(data, "offsets/0")


def test_an_empty_offsets_file_names_the_rewind_that_removes_it():
    with pytest.raises(MalformedFileError) as info:
        parse_offsets(b"", "offsets/7")
    assert "rewind with to_batch=6 removes it" in str(info.value) and "<" not in str(info.value)
    from wmcheck.cli.flags import cli_spelling

    assert "rewind with --to-batch 6 removes it" in info.value.text(cli_spelling)


def test_every_log_parser_opens_a_file_the_same_way():
    """Empty files and version headers: one rule (textlog.open_log) for every Spark text log."""
    from wmcheck.checkpoint.logs.file_logs import parse_file_log
    from wmcheck.checkpoint.logs.kafka_offsets import parse_kafka_initial_offsets
    from wmcheck.checkpoint.logs.operator_metadata import parse_operator_metadata

    for parse in (parse_offsets, parse_commit, parse_file_log, parse_operator_metadata, parse_kafka_initial_offsets):
        with pytest.raises(MalformedFileError, match=r"^x/1: file is empty: expected a version line, then "):
            parse(b"", "x/1")
        with pytest.raises(MalformedFileError, match=r'^x/1: line 1: line 1 is "w1": expected a .* version header'):
            parse(b"w1\n{}", "x/1")
        with pytest.raises(NewerVersionError, match=r'^x/1: line 1 is "v9": written by a newer Spark'):
            parse(b"v9\n{}", "x/1")
