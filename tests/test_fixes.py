"""A finding's fix is data: a repair's request (printed as the command line that runs it) or an instruction; one
recommended repair when errors advise several."""
from __future__ import annotations

import dataclasses
import shlex

import click
import pytest

from wmcheck.checkpoint.checks.definition import Finding, Instruction
from wmcheck.checkpoint.checks.recommend import recommended_repair
from wmcheck.checkpoint.repair import (
    RelocateRequest,
    RepartitionRequest,
    RewindRequest,
    SetWatermarkRequest,
    UndoRequest,
)
from wmcheck.checkpoint.repair.registry import LISTED
from wmcheck.cli.fixes import fix_doc, fix_text
from wmcheck.cli.flags import cli_spelling
from wmcheck.cli.main import cli


def error(fix, code: str = "WM016", severity: str = "error") -> Finding:
    return Finding(code, severity, "ckpt", "state/0/1", "message", fix)


@pytest.mark.parametrize("request_type", [*LISTED, UndoRequest], ids=lambda t: t.command)
def test_every_parameter_of_a_request_is_a_flag_of_its_command(request_type):
    command = cli.get_command(click.Context(cli), request_type.command)
    assert command is not None
    flags = {opt for param in command.params if isinstance(param, click.Option) for opt in param.opts}
    names = [f.name for f in dataclasses.fields(request_type) if f.compare]
    assert {cli_spelling(name, None) for name in names} <= flags


def test_a_request_is_printed_as_the_command_that_runs_it():
    assert fix_text(RewindRequest(to_batch=11, file_sink="/data/out dir"), "my ckpt") == (
        "wmcheck rewind 'my ckpt' --to-batch 11 --file-sink '/data/out dir'")
    assert fix_text(RewindRequest(to_batch=11, file_sink="/x", keep_next_offsets=True), "CKPT", "SINK") == (
        "wmcheck rewind CKPT --to-batch 11 --file-sink SINK --keep-next-offsets")
    assert fix_text(SetWatermarkRequest(watermark=1704067285000, allow_raise=True), "c") == (
        "wmcheck set-watermark c --watermark 1704067285000 --allow-raise")
    line = fix_text(RelocateRequest(path_map={"/old": "/new", "/a b": "/c"}, file_sink="/new/out"), "c")
    assert shlex.split(line) == ["wmcheck", "relocate", "c", "--path-map", "/old=/new", "--path-map", "/a b=/c",
                                 "--file-sink", "/new/out"]
    assert fix_text(RepartitionRequest(file_sink="/o", runner=object()), "c") == "wmcheck repartition c --file-sink /o"
    assert fix_text(UndoRequest(), "c") == "wmcheck undo c"
    assert fix_text(Instruction("restore metadata from a backup"), "c") == "by hand: restore metadata from a backup"


def test_json_gives_the_request_its_parameters_and_an_instruction_none():
    assert fix_doc(RewindRequest(to_batch=3, file_sink="/o"), "c") == {
        "kind": "rewind", "text": "wmcheck rewind c --to-batch 3 --file-sink /o", "request": {"to_batch": 3, "file_sink": "/o"}}
    assert fix_doc(Instruction("send data"), "c") == {"kind": "instruction", "text": "send data", "request": None}


def test_undo_comes_first_then_the_earliest_rewind_with_the_sink():
    undo = error(UndoRequest(), "WM026")
    rewinds = [error(RewindRequest(to_batch=11)), error(RewindRequest(to_batch=10, file_sink="/o"), "WM002")]
    assert recommended_repair([*rewinds, undo]) == UndoRequest()
    assert recommended_repair(rewinds) == RewindRequest(to_batch=10, file_sink="/o")
    kept = [error(RewindRequest(to_batch=11, keep_next_offsets=True)), error(RewindRequest(to_batch=12), "WM017")]
    assert recommended_repair(kept) == RewindRequest(to_batch=11, keep_next_offsets=True)
    both = [*kept, error(RewindRequest(to_batch=11), "WM001")]
    assert recommended_repair(both) == RewindRequest(to_batch=11)


def test_other_repairs_only_when_the_errors_agree_and_never_for_warnings_or_instructions():
    relocate = RelocateRequest(path_map={"/a": "/b"}, file_sink="/b/out")  # a path map does not hash
    assert recommended_repair([error(relocate, "WM032"), error(relocate, "WM033")]) == relocate
    assert recommended_repair([error(relocate, "WM032"), error(RelocateRequest(), "WM027")]) is None
    assert recommended_repair([error(Instruction("restore it"), "WM018")]) is None
    assert recommended_repair([error(RewindRequest(to_batch=12), "WM017", "warning")]) is None


def test_a_findings_fix_runs_as_it_is_and_an_instruction_does_not(copy_fixture):
    """The fix of an interrupted rewind (WM026) is an undo, run through run_fix as check gives it: the checkpoint is
    as it was; an instruction is refused in one line."""
    from wmcheck.checkpoint import repair
    from wmcheck.checkpoint.errors import CheckpointError
    from wmcheck.checkpoint.repair._hooks import injected
    from wmcheck.checkpoint.validate import check_location

    ckpt = str(copy_fixture("agg_window_hdfs") / "checkpoint")
    with pytest.raises(repair.InjectedFailure), injected(fail_after=3):
        repair.run(ckpt, RewindRequest(to_batch=9), repair.RunOptions(execute=True, idle_ms=0))
    found = check_location(ckpt)
    fix = next(f.fix for f in found if f.code == "WM026")
    assert fix == UndoRequest() == recommended_repair(found)
    done = repair.run_fix(ckpt, fix, repair.RunOptions(idle_ms=0))
    assert isinstance(done, repair.UndoResult) and done.restored and check_location(ckpt) == []
    with pytest.raises(CheckpointError, match="no wmcheck repair"):
        repair.run_fix(ckpt, Instruction("restore metadata from a backup"))  # type: ignore[arg-type]

