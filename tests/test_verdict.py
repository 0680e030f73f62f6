"""``show``'s verdict is ``check``'s: the same checkpoint never gets two answers (whether and how Spark restarts,
which state it loads, which code a damaged file has), and ``show`` says it first."""
from __future__ import annotations

import json
import re

import pytest

from conftest import run_cli

NO_WATERMARK = ("checkpoint-version-2.1.0", "escaped-path-2.4.0/chk%252520%252525@%252523chk",
                "checkpoint-version-4.0.0-tws-unsaferow", "checkpoint-version-4.0.0/rocksdb/agg")


def show_json(ckpt) -> dict:
    return json.loads(run_cli("show", ckpt, "--format", "json").stdout)


@pytest.mark.parametrize("where", NO_WATERMARK)
def test_a_query_without_a_watermark_has_no_watermark_stall(corpus, where):
    """Every batch ran with watermark 0 (no withWatermark): nothing is stalled, in show's table and JSON alike."""
    ckpt = corpus / where
    assert show_json(ckpt)["watermark_stall"] is None
    assert re.search(r"^watermark stall: +none$", run_cli("show", ckpt).stdout, re.M)


def test_a_watermark_held_over_one_data_batch_is_no_stall(copy_fixture):
    """union_stall_min's watermark stays put from batch 5 on; kept up to batch 5 alone, that is one data batch."""
    ckpt = copy_fixture("union_stall_min") / "checkpoint"
    assert show_json(ckpt)["watermark_stall"]["batches"] == 6
    for batch in range(6, 11):
        (ckpt / "offsets" / str(batch)).unlink()
        (ckpt / "commits" / str(batch)).unlink()
    assert show_json(ckpt)["watermark_stall"] is None
    (ckpt / "commits" / "5").unlink()
    assert show_json(ckpt)["watermark_stall"] is None
