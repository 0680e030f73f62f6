"""Every checkpoint of Spark's own golden files (../shared/spark-checkpoints) parses and summarises."""
from __future__ import annotations

import json

import pytest

from wmcheck.checkpoint.logs.commits import parse_commit, serialize_commit
from wmcheck.checkpoint.logs.offsets import parse_offsets, serialize_offsets
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.summary import batch_range, batch_rows
from wmcheck.checkpoint.verdict import show_checkpoint as describe
from wmcheck.cli.output import plain

from conftest import CORPUS, run_cli


def corpus_roots() -> list[str]:
    if not CORPUS.is_dir():
        return []
    roots = {p.parent for p in CORPUS.rglob("metadata") if p.is_file() and p.parent.name != "_metadata"}
    return sorted(str(r.relative_to(CORPUS)) for r in roots)


def corpus_log_files(kind: str) -> list[str]:
    if not CORPUS.is_dir():
        return []
    return sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob(f"{kind}/*") if p.is_file() and p.name.isdigit())


@pytest.mark.parametrize("root", corpus_roots() or ["(absent)"])
def test_every_corpus_checkpoint_summarises(corpus, root):
    ckpt = open_checkpoint(str(corpus / root))
    doc = describe(ckpt)
    json.dumps(plain(doc))
    assert doc.query_id
    rows = batch_rows(ckpt, batch_range(ckpt))
    assert [r.batch for r in rows] == sorted(set(ckpt.offset_ids) | set(ckpt.commit_ids))


@pytest.mark.parametrize("path", corpus_log_files("offsets") or ["(absent)"])
def test_corpus_offsets_roundtrip_byte_exact(corpus, path):
    data = (corpus / path).read_bytes()
    assert serialize_offsets(parse_offsets(data, path)) == data.rstrip(b"\n")


@pytest.mark.parametrize("path", corpus_log_files("commits") or ["(absent)"])
def test_corpus_commits_roundtrip_byte_exact(corpus, path):
    data = (corpus / path).read_bytes()
    assert serialize_commit(parse_commit(data, path)) == data


def test_state_source_watermark_is_the_larger_of_offsets_and_commit(corpus):
    doc = describe(open_checkpoint(str(corpus / "checkpoint-version-4.0.0-state-source")))
    assert (doc.first_batch, doc.last_batch, doc.last_committed_batch, doc.pending_batch) == (0, 30, 30, None)
    assert doc.watermark_ms == 1717623239519  # commits/30, above offsets/30's 1717623229519
    assert doc.watermark == "2024-06-05T21:33:59.519Z"
    assert doc.conf["shuffle_partitions"] == "4"
    assert doc.operators[0].name == "stateStoreSave"


def test_inconsistent_checkpoint_is_reported_not_crashed(corpus):
    root = corpus / "checkpoint-test-offsetId-commitId-inconsistent"
    doc = describe(open_checkpoint(str(root)))
    assert (doc.first_batch, doc.last_batch, doc.last_committed_batch, doc.pending_batch) == (1, 4, None, 4)
    assert doc.watermark_ms == 5000
    assert [(f.code, f.severity, f.path) for f in doc.findings] == [("WM002", "error", "offsets/3")]
    assert (doc.verdict.restarts, doc.verdict.worst) == (False, doc.findings[0])
    result = run_cli("show", root)
    assert result.stdout.startswith("restarts:              no: 1 error makes Spark fail, lose data or misbehave on restart "
                                    "(their fixes: wmcheck check)\nworst finding:         error WM002 offsets/3: offsets/3 missing between")


def test_checkpoint_v2_commits_and_multi_source(corpus):
    v2 = open_checkpoint(str(corpus / "checkpoint-version-4.0.0-checkpoint-v2/rocksdb/dedup"))
    assert v2.commit(1).version == 2 and len(v2.commit(1).state_unique_ids["0"]) == 5
    multi = open_checkpoint(str(corpus / "checkpoint-version-2.3.1-for-multi-watermark-policy"))
    assert len(multi.offsets(1).sources) == 2


def test_pretty_printed_legacy_metadata(corpus):
    from wmcheck.checkpoint.logs.query_metadata import parse_query_metadata

    data = (corpus / "query-metadata-logs-version-2.1.0.txt").read_bytes()
    assert parse_query_metadata(data).query_id
