"""The python state engine against the rows Spark's state reader returned for every fixture store
(``fixture.json``, recorded by the generator with pyspark's ``statestore`` reader): no JVM here."""
from __future__ import annotations

import json

import pytest

from conftest import fixture_checkpoint, fixture_facts, fixture_names
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.statestore.discovery import Store
from wmcheck.statestore.python_engine import read_store
from wmcheck.statestore.reader import jsonable, target

STORES = [(n, op, s) for n in fixture_names() for op, stores in fixture_facts(n)["state"].items() for s in stores]


def reader_store(ckpt, op: int, name: str) -> Store:
    """The store as the fixture generator read it: by storeName, stateVarName or readRegisteredTimers."""
    operator = next(o for o in ckpt.operators if o.operator_id == op)
    if name.startswith("$eventTimers"):
        options = {"readRegisteredTimers": "true"}
    elif name in operator.stores:
        options = {"storeName": name}
    else:
        options = {"stateVarName": name}
    return Store(op, operator.name, name, {"operatorId": str(op), **options}, operator.num_partitions, name)


def canonical(rows: list[dict]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


@pytest.mark.parametrize("name,op,store", STORES)
def test_rows_equal_spark_reader_rows(name, op, store):
    ckpt = open_checkpoint(str(fixture_checkpoint(name)))
    read = read_store(ckpt, reader_store(ckpt, int(op), store), target(ckpt))
    got = [jsonable(r) for r in read.raw.to_pylist()]
    want = fixture_facts(name)["state"][op][store]["rows"]
    assert canonical(got) == canonical(want)
    assert len(got) == sum(fixture_facts(name)["state"][op][store]["rows_per_partition"].values())
