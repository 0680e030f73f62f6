"""A kind of source is one object of the :class:`~wmcheck.checkpoint.sources.protocol.SourceKind` protocol, listed in
checkpoint/sources/registry.py: a toy kind put into the registry (and nowhere else) is what show, batches and
``replay --plan`` recognise, describe and plan, on the Python data source of fixtures/python_source (whose offsets
``{"files": n}`` are of no kind wmcheck knows)."""
from __future__ import annotations

import json

import pytest

from wmcheck.checkpoint.logs.source_offsets import SourceOffset
from wmcheck.checkpoint.sources import registry
from wmcheck.checkpoint.sources.protocol import InputRequest, SourceInput, SourceKind

from conftest import fixture_checkpoint, run_cli

CKPT = fixture_checkpoint("python_source")


class FilesSoFar(SourceKind):
    """The toy: an offset ``{"files": n}`` counts the files the source served so far."""

    name = "counter"

    def matches(self, src: SourceOffset) -> bool:
        return isinstance(src.value, dict) and set(src.value) == {"files"}

    def summary(self, src: SourceOffset) -> str:
        return f"{src.value['files']} files so far"

    def location(self, ckpt, src: SourceOffset) -> str | None:
        return "a Python data source"

    def batch_input(self, ckpt, batch: int, src: SourceOffset, prev: SourceOffset | None,
                    request: InputRequest) -> SourceInput:
        first = prev.value["files"] if prev is not None else 0
        return SourceInput(src.source_id, self.name, prev, src, records=src.value["files"] - first, replayable=False,
                           note=f"files {first}..{src.value['files']} of the data source")

    def input_text(self, src: SourceInput) -> str | None:
        return f"{src.records} new files"


@pytest.fixture
def toy(monkeypatch):
    kinds = registry.KINDS
    assert kinds[-1].name == "unknown"  # the last kind matches any offset
    monkeypatch.setattr(registry, "KINDS", (*kinds[:-1], FilesSoFar(), kinds[-1]))


def shown(*args: str) -> str:
    return run_cli(*args, CKPT, "--tz", "UTC", "--wide").stdout


def test_without_its_kind_the_offsets_are_unknown():
    doc = json.loads(run_cli("show", CKPT, "--format", "json").stdout)
    assert doc["sources"] == [{"source_id": "0", "kind": "unknown", "offset": '{"files": 10}',
                               "summary": '{"files": 10}', "location": None}]
    assert "0 unknown: {\"files\": 4} (new data)" in shown("batches")
    plan = json.loads(run_cli("replay", CKPT, "--plan", "--from", "1", "--to", "1", "--format", "json").stdout)
    assert [(s["kind"], s["note"]) for b in plan["batches"] for s in b["sources"]] == [
        ("unknown", 'an unknown offset ({"files": 7}): wmcheck cannot rebuild this source\'s input')]


def test_a_kind_put_into_the_registry_is_recognised_described_and_planned(toy):
    doc = json.loads(run_cli("show", CKPT, "--format", "json").stdout)
    assert doc["sources"] == [{"source_id": "0", "kind": "counter", "offset": '{"files": 10}',
                               "summary": "10 files so far", "location": "a Python data source"}]
    assert [line.split("  ")[-1] for line in shown("batches").splitlines()[2:]] == [
        f"0 counter a Python data source: {n} files so far (new data)" for n in (4, 7, 10)]
    plan = json.loads(run_cli("replay", CKPT, "--plan", "--from", "1", "--format", "json").stdout)
    assert [(s["kind"], s["replayable"], s["note"]) for b in plan["batches"] for s in b["sources"]] == [
        ("counter", False, "files 4..7 of the data source"), ("counter", False, "files 7..10 of the data source")]
    table = shown("replay", "--plan", "--from", "1")
    assert "3 new files" in table and "files 7..10 of the data source" in table
