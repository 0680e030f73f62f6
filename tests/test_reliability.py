"""Named regressions: data loss (D), crashes and hangs (E), wrong or weak behaviour (M) once found by
real kills, fuzzing and mutated checkpoints."""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_repair_execute import copy_of, tree, trees
from test_repair_kill import STRACE, cli, leftovers

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.errors import CheckpointError, MalformedFileError, RefusedError, spelled
from wmcheck.checkpoint.logs.commits import parse_commit
from wmcheck.checkpoint.logs.file_logs import parse_file_log
from wmcheck.checkpoint.logs.offsets import parse_offsets
from wmcheck.checkpoint.logs.source_offsets import SourceOffset
from wmcheck.checkpoint.validate import check_location

from conftest import age, fixture_facts, run_cli, sink_at_home

HDFS = "agg_window_hdfs"
LOWER = fixture_facts(HDFS)["next_watermark_ms"] - 60_000
needs_strace = pytest.mark.skipif(STRACE is None and not os.environ.get("CI"), reason="strace is not installed")


def executed(ckpt: Path, request: repair.RepairRequest, **options) -> repair.RepairResult:
    return repair.run(str(ckpt), request, repair.RunOptions(execute=True, idle_ms=options.pop("idle_ms", 0), **options))


def calls(args: list[str], syscall: str, where: Path) -> list[str]:
    """The arguments of every ``syscall`` a full run of ``args`` makes (on a throwaway copy at ``where``)."""
    log = where.parent / f"{where.name}.strace"
    assert cli(args, [STRACE, "-f", "-qq", "-o", str(log), "-e", f"trace={syscall}"]).returncode == 0
    return re.findall(rf"{syscall}\((.*)\)\s+=", log.read_text())


def killed_at(args: list[str], syscall: str, k: int) -> None:
    run = cli(args, [STRACE, "-f", "-qq", "-o", "/dev/null", "-e", f"trace={syscall}",
                     "-e", f"inject={syscall}:signal=KILL:when={k}"])
    assert run.returncode != 0, run.stdout


def set_watermark_args(root: Path) -> list[str]:
    return ["set-watermark", str(root / "checkpoint"), f"--watermark={LOWER}"]


# -- D: data loss and stuck repairs -----------------------------------------------------------------


@needs_strace
def test_d1_set_watermark_killed_before_the_last_original_is_saved_then_undone(tmp_path):
    scratch = copy_of(HDFS, tmp_path, "-scratch")
    renames = calls(set_watermark_args(scratch), "rename", scratch)
    last = fixture_facts(HDFS)["last_batch"]
    k = 1 + next(i for i, a in enumerate(renames) if a.endswith(f'files/checkpoint/commits/.{last}.crc"'))
    root = copy_of(HDFS, tmp_path)
    original = trees(root)
    killed_at(set_watermark_args(root), "rename", k)
    assert repair.undo_repair(str(root / "checkpoint"), idle_ms=0).was == "applying"
    assert trees(root) == original and (root / "checkpoint" / "commits" / f".{last}.crc").exists()
    assert not leftovers(root)


def test_d2_undo_refuses_an_edited_plan_and_never_deletes_an_unsaved_file(tmp_path):
    root = copy_of(HDFS, tmp_path)
    done = executed(root / "checkpoint", repair.RewindRequest(to_batch=10, file_sink=str(root / "output")))
    plan_file = root / "checkpoint" / "_wmcheck" / "backups" / done.backup_id / "plan.json"
    victim = tmp_path / "elsewhere" / "precious"
    victim.parent.mkdir()
    victim.write_bytes(b"keep me")
    plan = json.loads(plan_file.read_text())
    plan["file_sink"] = str(victim.parent)
    plan["steps"][0].update(action="write", sha256=None)
    plan_file.write_text(json.dumps(plan))
    with pytest.raises(MalformedFileError, match="the repair's plan was changed after the repair was made"):
        repair.undo_repair(str(root / "checkpoint"), idle_ms=0)
    assert victim.read_bytes() == b"keep me"


@needs_strace
def test_d3_set_watermark_killed_while_saving_originals_is_undone_or_finished(tmp_path):
    scratch = copy_of(HDFS, tmp_path, "-scratch")
    renames = calls(set_watermark_args(scratch), "rename", scratch)
    saving = [i + 1 for i, a in enumerate(renames) if "/files/checkpoint/" in a]
    assert len(saving) == 4  # offsets and commits, each with its sidecar
    for k in saving:
        for then in ("undo", "re-run"):
            root = copy_of(HDFS, tmp_path, f"-{k}-{then}")
            original = trees(root)
            killed_at(set_watermark_args(root), "rename", k)
            if then == "undo":
                repair.undo_repair(str(root / "checkpoint"), idle_ms=0)
                assert trees(root) == original
            else:
                assert executed(root / "checkpoint", repair.SetWatermarkRequest(watermark=LOWER)).resumed is not None
                assert open_watermark(root) == LOWER
            assert not leftovers(root)
            shutil.rmtree(root)


def open_watermark(root: Path) -> int:
    from wmcheck.checkpoint.model import open_checkpoint

    return open_checkpoint(str(root / "checkpoint")).watermark_ms


@needs_strace
def test_d4_undo_killed_before_dropping_its_journal_is_finished_by_undo(tmp_path):
    scratch = copy_of(HDFS, tmp_path, "-scratch")
    executed(scratch / "checkpoint", repair.SetWatermarkRequest(watermark=LOWER))
    unlinks = calls(["undo", str(scratch / "checkpoint")], "unlink", scratch)
    k = 1 + next(i for i, a in enumerate(unlinks) if a.endswith('_wmcheck/journal.json"'))
    root = copy_of(HDFS, tmp_path)
    original = trees(root)
    executed(root / "checkpoint", repair.SetWatermarkRequest(watermark=LOWER))
    killed_at(["undo", str(root / "checkpoint")], "unlink", k)
    assert any(f.code == "WM026" for f in check_location(str(root / "checkpoint")))
    with pytest.raises(RefusedError, match="an undo of repair .* was interrupted"):
        executed(root / "checkpoint", repair.SetWatermarkRequest(watermark=LOWER))
    repair.undo_repair(str(root / "checkpoint"), idle_ms=0)
    assert trees(root) == original and not leftovers(root)
    assert not any(f.code == "WM026" for f in check_location(str(root / "checkpoint")))
    assert executed(root / "checkpoint", repair.SetWatermarkRequest(watermark=LOWER)).executed  # not wedged


def test_d5_a_stale_lock_is_taken_over_and_a_live_one_refuses(tmp_path):
    root = copy_of(HDFS, tmp_path)
    lock = root / "checkpoint" / "_wmcheck" / "lock"
    lock.parent.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    owner = {"pid": dead.pid, "host": socket.gethostname(), "started_ms": 0, "command": "rewind", "token": "t"}
    lock.write_text(json.dumps(owner))
    done = executed(root / "checkpoint", repair.RewindRequest(to_batch=10))
    assert done.warnings[0].startswith(f"took over the lock of wmcheck rewind (pid {dead.pid} on ")
    assert done.warnings[0].endswith("which is no longer running") and not lock.exists()
    lock.write_text(json.dumps({**owner, "pid": os.getpid()}))  # alive: this very process
    with pytest.raises(RefusedError, match=f"another repair is running on this checkpoint: wmcheck rewind \\(pid {os.getpid()}"):
        repair.undo_repair(str(root / "checkpoint"), idle_ms=0)
    lock.write_text(json.dumps({**owner, "host": "another-host"}))
    result = run_cli("undo", str(root / "checkpoint"), "--idle", "0", exit_code=2)
    assert result.stderr.startswith("Error: _wmcheck/lock: another repair is running on this checkpoint: wmcheck "
                                    "rewind (pid ") and result.stderr.count("\n") == 1


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="zombies are told from /proc")
def test_d5_a_lock_held_by_a_zombie_is_taken_over(tmp_path):
    """A SIGKILLed wmcheck whose parent died too is a zombie until init reaps it (a container's may never): dead."""
    root = copy_of(HDFS, tmp_path)
    lock = root / "checkpoint" / "_wmcheck" / "lock"
    lock.parent.mkdir()
    zombie = subprocess.Popen(["true"])  # exits and is not waited for
    while Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.01)
    lock.write_text(json.dumps({"pid": zombie.pid, "host": socket.gethostname(), "started_ms": 0,
                                "command": "repartition", "token": "t"}))
    done = executed(root / "checkpoint", repair.RewindRequest(to_batch=10))
    assert done.warnings[0].startswith(f"took over the lock of wmcheck repartition (pid {zombie.pid} on ")
    assert not lock.exists()
    zombie.wait()


def test_d6_undo_on_a_copy_leaves_the_original_sink_alone(tmp_path):
    first = copy_of(HDFS, tmp_path)
    original = trees(first)
    executed(first / "checkpoint", repair.RewindRequest(to_batch=10, file_sink=str(first / "output")))
    repaired = trees(first)
    copy = tmp_path / "copy"
    shutil.copytree(first, copy)
    with pytest.raises(RefusedError, match="undo would restore the file sink of the original location"):
        repair.undo_repair(str(copy / "checkpoint"), idle_ms=0)
    repair.undo_repair(str(copy / "checkpoint"), idle_ms=0, file_sink=str(copy / "output"))
    assert trees(copy) == original and trees(first) == repaired


# -- E: crashes and hangs ---------------------------------------------------------------------------


@pytest.mark.parametrize("header", ["v\u00b2", "v" + "9" * 5000, "v 1", "v1.0", "v0", "1"])
def test_e1_version_headers_with_odd_digits_are_malformed(header):
    for parse, body in ((parse_offsets, "\n{}\n-"), (parse_commit, "\n{}"), (parse_file_log, "\n{}")):
        with pytest.raises(CheckpointError, match="version header"):
            parse(f"{header}{body}".encode(), "some/file")


@pytest.mark.parametrize("header", ["v01", "v+1", "v\u0661"])
def test_e1_version_headers_integer_parseint_reads_are_read(header):
    """Spark reads a header's number with Integer.parseInt: leading zeros, a sign and other scripts' digits are 1
    (v+1 and v\u0661 restarted: test_restart_oracle.py's SILENT cases)."""
    assert parse_offsets(f"{header}\n{{}}\n-".encode(), "some/file").version == 1
    assert parse_commit(f"{header}\n{{}}".encode(), "some/file").version == 1
    assert parse_file_log(f"{header}\n".encode(), "some/file").version == 1
    with pytest.raises(CheckpointError, match="newer Spark"):
        parse_offsets("v\u0663\n{}\n-".encode(), "some/file")


def test_e1_only_the_commit_log_trims_its_header():
    """CommitLog reads its header trimmed, OffsetSeqLog and the file logs as it is ('v1 ' fails a restart: oracle)."""
    assert parse_commit(b" v1 \n{}", "c").version == 1
    for parse, body in ((parse_offsets, "\n{}\n-"), (parse_file_log, "\n")):
        with pytest.raises(CheckpointError, match="version header"):
            parse(f"v1 {body}".encode(), "some/file")


def test_e1_kafka_initial_offsets_with_odd_digits_are_malformed():
    from wmcheck.checkpoint.logs.kafka_offsets import parse_kafka_initial_offsets

    for header in ("v\u00b2", "v" + "9" * 5000):
        with pytest.raises(CheckpointError):
            parse_kafka_initial_offsets(f"\x00\x00{header}\n{{}}".encode(), "sources/0/0")


def test_e2_a_kafka_partition_named_with_a_non_ascii_digit_is_not_kafka():
    src = SourceOffset("0", '{"topic":{"\u00b2":5}}')
    assert src.kind == "unknown" and src.kafka_offsets is None and src.summary() == '{"topic":{"\u00b2":5}}'


def test_e3_a_source_offset_nested_100000_deep_is_unknown():
    seq = parse_offsets(b"v1\n{}\n" + b"[" * 100_000 + b"]" * 100_000, "offsets/0")
    assert seq.sources[0].kind == "unknown" and seq.sources[0].summary().startswith("[[[")


def test_e4_files_named_with_non_ascii_digits_are_ignored(tmp_path):
    root = copy_of(HDFS, tmp_path)
    ckpt = root / "checkpoint"
    for path in (ckpt / "offsets" / "\u00b2", ckpt / "sources" / "0" / "\u00b2", root / "output" / "_spark_metadata" / "\u00b2"):
        path.write_text("v1\n{}")
    run_cli("show", str(ckpt))
    sink_at_home(root, HDFS)  # its sink log names the files where the fixture was generated (WM032/WM033)
    out = run_cli("check", str(ckpt), "--file-sink", str(root / "output"), "--format", "json").stdout
    assert json.loads(out) == []


@pytest.mark.parametrize("where", ["state/0/0/99.delta", "commits/99"])
@pytest.mark.parametrize("kind", ["loop", "dangling"])
def test_e5_symlink_loops_and_dangling_links_are_listed_not_fatal(where, kind, tmp_path):
    root = copy_of(HDFS, tmp_path)
    link = root / "checkpoint" / where
    link.symlink_to(link if kind == "loop" else root / "nowhere")
    # a state file beyond the last batch is a warning (WM017: Spark restarts fine), a commit without offsets an error
    result = run_cli("check", str(root / "checkpoint"), "--format", "json", exit_code=1 if where.startswith("commits") else 0)
    assert "Traceback" not in result.output
    run_cli("show", str(root / "checkpoint"))
    shown = repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=10), repair.RunOptions(idle_ms=0))
    assert shown.plan.steps


def test_e6_a_corrupt_rocksdb_zip_leaves_ssts_alone_with_a_warning(tmp_path):
    root = copy_of("agg_window_rocksdb", tmp_path)
    part = root / "checkpoint" / "state" / "0" / "0"
    zips = sorted(part.glob("*.zip"), key=lambda p: int(p.stem))
    data = bytearray(zips[-1].read_bytes())
    data[40:200] = bytes(160)  # a corrupt deflate stream inside a valid zip directory
    zips[-1].write_bytes(bytes(data))
    shown = repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=5), repair.RunOptions(idle_ms=0))
    assert any("cannot read its SST file list" in w for w in shown.warnings) or shown.plan.steps


def test_e7_check_time_does_not_grow_with_the_batch_id(tmp_path):
    root = copy_of(HDFS, tmp_path)
    last = fixture_facts(HDFS)["last_batch"]
    shutil.copyfile(root / "checkpoint" / "offsets" / str(last), root / "checkpoint" / "offsets" / "100000000")
    start = time.perf_counter()
    codes = {f.code for f in check_location(str(root / "checkpoint"))}
    assert time.perf_counter() - start < 10 and {"WM002", "WM016"} <= codes


# -- M: wrong or weak -----------------------------------------------------------------------------


def test_m1_unwritable_checkpoint_or_plan_file_is_one_line(tmp_path):
    root = copy_of(HDFS, tmp_path)
    ckpt = root / "checkpoint"
    (ckpt / "_wmcheck").write_text("not a directory")  # every write below it fails, as on a read-only disk
    result = run_cli("rewind", str(ckpt), "--to-batch", "10", "--execute", "--idle", "0", exit_code=2)
    assert result.stderr.startswith("Error: _wmcheck/") and "cannot write" in result.stderr
    assert result.stderr.count("\n") == 1
    blocked = tmp_path / "file"
    blocked.write_text("")
    other = copy_of(HDFS, tmp_path, "-other")
    result = run_cli("rewind", str(other / "checkpoint"), "--to-batch", "10", "--plan-out", str(blocked / "plan.json"),
                     exit_code=2)
    assert result.stderr.startswith(f"Error: {blocked}/plan.json: cannot write the plan: ") and result.stderr.count("\n") == 1


def test_m2_an_unreadable_file_is_reported_and_the_rest_checked(tmp_path):
    root = copy_of(HDFS, tmp_path)
    ckpt = root / "checkpoint"
    (ckpt / "offsets" / "7").unlink()
    (ckpt / "offsets" / "7").mkdir()
    (ckpt / "commits" / ".13.a1b2.tmp").write_text("v1\n")
    findings = {(f.code, f.path) for f in check_location(str(ckpt))}
    assert {("WM055", "offsets/7"), ("WM009", "commits/.13.a1b2.tmp")} <= findings, findings  # not read on restart


def test_m3_set_watermark_notices_the_query_writing_the_file_it_rewrites(tmp_path):
    root = copy_of(HDFS, tmp_path)
    age(root)
    last = fixture_facts(HDFS)["last_batch"]
    os.utime(root / "checkpoint" / "offsets" / str(last))
    with pytest.raises(RefusedError, match=f"the query looks active: offsets/{last} was modified"):
        executed(root / "checkpoint", repair.SetWatermarkRequest(watermark=LOWER), idle_ms=600_000)


@needs_strace
def test_m4_a_killed_set_watermark_undone_leaves_no_temp_file(tmp_path):
    scratch = copy_of(HDFS, tmp_path, "-scratch")
    renames = calls(set_watermark_args(scratch), "rename", scratch)
    last = fixture_facts(HDFS)["last_batch"]
    k = 1 + next(i for i, a in enumerate(renames) if a.endswith(f'checkpoint/offsets/{last}"') and "_wmcheck" not in a)
    root = copy_of(HDFS, tmp_path)
    killed_at(set_watermark_args(root), "rename", k)
    assert (root / "checkpoint" / "offsets" / f".{last}.wmcheck.tmp").exists()
    repair.undo_repair(str(root / "checkpoint"), idle_ms=0)
    assert not leftovers(root)


def test_m5_symlinks_are_refused_and_shown_in_the_dry_run(tmp_path):
    root = copy_of(HDFS, tmp_path)
    ckpt = root / "checkpoint"
    outside = tmp_path / "partition-elsewhere"
    shutil.move(ckpt / "state" / "0" / "1", outside)
    (ckpt / "state" / "0" / "1").symlink_to(outside)
    before = tree(outside)
    shown = repair.run(str(ckpt), repair.RewindRequest(to_batch=10), repair.RunOptions(idle_ms=0))
    assert "execute would refuse: state/0/1 (in the checkpoint) is a symbolic link" in map(spelled, shown.warnings)
    with pytest.raises(RefusedError, match="state/0/1 .* is a symbolic link: wmcheck does not change files through"):
        executed(ckpt, repair.RewindRequest(to_batch=10))
    assert tree(outside) == before
    other = copy_of(HDFS, tmp_path, "-own")
    (tmp_path / "own-elsewhere").mkdir()
    (other / "checkpoint" / "_wmcheck").symlink_to(tmp_path / "own-elsewhere")
    with pytest.raises(RefusedError, match="_wmcheck is a symbolic link"):
        executed(other / "checkpoint", repair.RewindRequest(to_batch=10))
    third = copy_of(HDFS, tmp_path, "-third")
    (tmp_path / "via").symlink_to(third / "checkpoint" / "state")
    with pytest.raises(CheckpointError, match="overlaps"):
        executed(third / "checkpoint", repair.RewindRequest(to_batch=10), backup_dir=str(tmp_path / "via"))


@needs_strace
def test_m6_a_query_coming_alive_during_the_repair_stops_it_journaled(tmp_path):
    root = copy_of(HDFS, tmp_path)
    original = trees(root)
    age(root)
    ckpt = root / "checkpoint"
    journal = ckpt / "_wmcheck" / "journal.json"

    def query_writes_a_batch() -> None:
        deadline = time.time() + 60
        while not journal.exists() and time.time() < deadline:
            time.sleep(0.01)
        (ckpt / "offsets" / "13").write_text("v1\n{}\n{\"logOffset\":12}")

    writer = threading.Thread(target=query_writes_a_batch)
    writer.start()
    slow = [STRACE, "-f", "-qq", "-o", "/dev/null", "-e", "trace=rename", "-e", "inject=rename:delay_enter=100000"]
    args = ["rewind", str(ckpt), "--to-batch", "10", "--execute", "--idle", "10m"]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    got = subprocess.run([*slow, sys.executable, "-m", "wmcheck.cli", *args], capture_output=True, text=True, env=env,
                         timeout=300)
    writer.join()
    assert got.returncode == 2 and "stopped: the query looks active: offsets/13 was modified" in got.stderr, got.stderr
    assert any(f.code == "WM026" for f in check_location(str(ckpt)))
    repair.undo_repair(str(ckpt), idle_ms=0)
    (ckpt / "offsets" / "13").unlink()
    assert trees(root) == original


@needs_strace
def test_show_names_a_repair_killed_before_its_journal_was_written(tmp_path):
    scratch = copy_of(HDFS, tmp_path, "-scratch")
    renames = calls(set_watermark_args(scratch), "rename", scratch)
    k = 1 + next(i for i, a in enumerate(renames) if "_wmcheck/journal.json" in a.split(",")[1])
    root = copy_of(HDFS, tmp_path)
    killed_at(set_watermark_args(root), "rename", k)
    ckpt = root / "checkpoint"
    assert not (ckpt / "_wmcheck" / "journal.json").exists()
    assert any(f.code == "WM026" for f in check_location(str(ckpt)))
    assert "error WM026 " in run_cli("show", ckpt).stdout  # check's finding, as show's worst
    repair.undo_repair(str(ckpt), idle_ms=0)
    assert "interrupted" not in run_cli("show", ckpt).stdout
