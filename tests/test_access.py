"""WM037: the directories Spark writes into must let the user running the check create files, proven as another
user (setpriv) and on a read-only mount (a mount namespace of its own); what Spark does is the restart oracle's
(tests/test_restart_oracle.py: a read-only source log and state store directory)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from wmcheck.checkpoint.validate import check_location

from conftest import FIXTURES
from restart_oracle import read_only

NAME, NOBODY = "agg_window_hdfs", 65534
root_only = pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root (to act as another user)")


@pytest.fixture
def shared_copy():
    """A copy of the fixture another user can read (pytest's own temporary directories are the owner's only)."""
    base = Path(tempfile.mkdtemp(prefix="wmcheck-access-"))
    base.chmod(0o755)
    shutil.copytree(FIXTURES / NAME, base / NAME, ignore=shutil.ignore_patterns("fixture.json"))
    yield base / NAME
    shutil.rmtree(base)


def check_json(root: Path, command: list[str] | None = None) -> tuple[int, list[dict]]:
    args = [sys.executable, "-m", "wmcheck.cli", "check", str(root / "checkpoint"), "--file-sink", str(root / "output"),
            "--select", "WM037", "--format", "json"]
    done = subprocess.run((command or []) + args, capture_output=True, text=True, timeout=120)
    assert done.stderr == "", done.stderr
    return done.returncode, json.loads(done.stdout)


@root_only
def test_a_directory_of_another_owner_is_an_error_for_this_user_only(shared_copy):
    """Everything owned by uid 65534 but sources/0 (root's, 0755): that user cannot write the file-source log, and
    check, run as that user, says so with its uid; as root (who can) it finds nothing."""
    for path in [shared_copy, *shared_copy.rglob("*")]:
        os.chown(path, NOBODY, NOBODY)
    os.chown(shared_copy / "checkpoint" / "sources" / "0", 0, 0)
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    code, rows = check_json(shared_copy, as_nobody)
    assert code == 1 and [(r["code"], r["severity"], r["path"]) for r in rows] == [("WM037", "error", "sources/0")]
    assert rows[0]["message"].startswith(f"uid {NOBODY}, the user this check ran as, cannot create files in 1 directory "
                                         f"Spark writes into: sources/0 (owned by uid 0, mode drwxr-xr-x)")
    assert rows[0]["fix"]["kind"] == "instruction" and f"give uid {NOBODY} write access" in rows[0]["fix"]["text"]
    assert not [f for f in check_location(str(shared_copy / "checkpoint"), str(shared_copy / "output")) if f.code == "WM037"]


@root_only
def test_a_read_only_mount_is_an_error_even_for_root(shared_copy):
    """A state store directory and the sink's log mounted read-only: root cannot write them either."""
    ckpt, sink = shared_copy / "checkpoint", shared_copy / "output"
    code, rows = check_json(shared_copy, read_only([], [ckpt / "state" / "0" / "1", sink / "_spark_metadata"]))
    assert code == 1 and [(r["code"], r["path"]) for r in rows] == [("WM037", "state/0/1")]
    assert ("cannot create files in 2 directories Spark writes into: state/0/1 (a read-only file system), "
            "../output/_spark_metadata (a read-only file system)") in rows[0]["message"]
    assert [f.code for f in check_location(str(ckpt), str(sink)) if f.code == "WM037"] == []


@root_only
def test_an_unreadable_checkpoint_is_named_as_given_and_its_fix_fits_the_cause(shared_copy):
    """A checkpoint directory this user cannot list: named by its location (not ``.``), the hint and check's fix
    naming the user, the owner and the mode; a path where nothing is, and a pattern that matches nothing, have
    their own fix."""
    ckpt = shared_copy / "checkpoint"
    ckpt.chmod(0o700)
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable, "-m", "wmcheck.cli"]
    hint = (f"give uid {NOBODY}, the user wmcheck ran as, read access to it with chmod or chown (it is owned by uid 0, "
            "mode drwx------), or run wmcheck as a user that has it")
    for command in ("show", "batches", "state"):
        done = subprocess.run([*as_nobody, command, str(ckpt)], capture_output=True, text=True, timeout=120)
        assert (done.returncode, done.stderr) == (2, f"Error: cannot list {ckpt}: Permission denied (hint: {hint})\n"), command
    done = subprocess.run([*as_nobody, "check", str(ckpt), "--format", "json"], capture_output=True, text=True, timeout=120)
    [row] = json.loads(done.stdout)
    assert (done.returncode, row["code"], row["path"], row["fix"]["text"]) == (2, "WM000", "", hint)
    fixes = {r["checkpoint"]: r["fix"]["text"] for r in json.loads(subprocess.run(
        [sys.executable, "-m", "wmcheck.cli", "check", str(shared_copy / "nowhere"), str(shared_copy / "nomatch*"), "--format", "json"],
        capture_output=True, text=True, timeout=120).stdout)}
    assert fixes == {str(shared_copy / "nowhere"): "nothing is at this path: pass the checkpoint directory (the one holding offsets/ and commits/)",
                     str(shared_copy / "nomatch*"): "no path matches this pattern: pass the checkpoint directory (the one holding offsets/ and commits/)"}


@root_only
def test_one_unreadable_state_directory_fails_only_what_reads_state(shared_copy, tmp_path):
    """state/0/1 this user cannot list: show (naming check's WM000 with the user, owner and mode first), batches and
    timeline read the logs as always; state, which needs it, and check, whose state checks would take it for a
    missing partition, say what cannot be read."""
    ckpt = shared_copy / "checkpoint"
    (ckpt / "state" / "0" / "1").chmod(0o700)
    out = Path(tempfile.mkdtemp(prefix="wmcheck-access-out-"))
    out.chmod(0o777)
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable, "-m", "wmcheck.cli"]
    error = (f"state/0/1: cannot list: Permission denied (hint: give uid {NOBODY}, the user wmcheck ran as, read access "
             "to state/0/1 with chmod or chown (it is owned by uid 0, mode drwx------), or run wmcheck as a user that has it)")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*as_nobody, *args], capture_output=True, text=True, timeout=120)

    try:
        shown = run("show", str(ckpt), "--format", "json")
        doc = json.loads(shown.stdout)
        assert (shown.returncode, doc["verdict"]["restarts"], doc["verdict"]["worst"]["code"]) == (0, False, "WM000")
        assert doc["verdict"]["worst"]["message"] == error and not doc["operators"][0]["next_version_loadable"]
        assert run("batches", str(ckpt)).returncode == 0
        assert run("timeline", str(ckpt), "--output", str(out / "t.svg")).returncode == 0
        state = run("state", str(ckpt))
        assert (state.returncode, state.stderr) == (2, f"Error: {error}\n")
        checked = run("check", str(ckpt), "--format", "json")
        assert (checked.returncode, [(f["code"], f["path"]) for f in json.loads(checked.stdout)]) == (2, [("WM000", "state/0/1")])
    finally:
        shutil.rmtree(out)
