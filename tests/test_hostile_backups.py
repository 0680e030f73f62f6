"""A backup, a manifest and a saved plan are untrusted input: whatever was done to ``_wmcheck/backups/`` (a link,
a swapped file, a hard link, an edited manifest or plan, ``..`` in a name, a location switched behind a symbolic
link), ``undo`` refuses before its first change with one line naming the path, and nothing outside the checkpoint
and its sink is touched: a victim directory beside them hashes the same before and after."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_repair_execute import copy_of, trees

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.errors import CheckpointError
from wmcheck.checkpoint.repair_records import checksum

from conftest import run_cli

HDFS = "agg_window_hdfs"
SAVED = "files/checkpoint/commits/12"
"""A file the rewind moved into the backup (undo moves it back)."""
NO_LINK = "the backup holds a symbolic link where the repair saved none: undo changes nothing"


def snapshot(top: Path) -> dict[str, tuple]:
    """Every entry below ``top`` as it is, links not followed: files by content and names, links by target."""
    out: dict[str, tuple] = {}
    for base, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(base) / name
            st = path.lstat()
            rel = str(path.relative_to(top))
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                out[rel] = ("dir",)
            else:
                out[rel] = ("file", hashlib.sha256(path.read_bytes()).hexdigest(), st.st_nlink)
    return out


@dataclass
class Case:
    root: Path
    victim: Path
    backup_id: str

    @property
    def ckpt(self) -> Path:
        return self.root / "checkpoint"

    @property
    def backup(self) -> Path:
        return self.ckpt / "_wmcheck" / "backups" / self.backup_id

    def saved(self, rel: str) -> Path:
        return self.backup / rel

    def edit_json(self, name: str, change: Callable[[dict], None], rehash: bool = False) -> None:
        """Edit the backup's ``name``; ``rehash``: also make the manifest's hashes and checksum agree (a careful edit)."""
        path = self.backup / name
        doc = json.loads(path.read_text())
        change(doc)
        path.write_text(json.dumps(doc))
        if rehash:
            manifest = json.loads((self.backup / "manifest.json").read_text())
            key = {"plan.json": "plan_sha256", "entries.json": "entries_sha256"}.get(name)
            if key:
                manifest[key] = hashlib.sha256(path.read_bytes()).hexdigest()
            manifest["checksum"] = checksum(manifest)
            (self.backup / "manifest.json").write_text(json.dumps(manifest))


def victim_dir(where: Path) -> Path:
    """Files a hostile backup could aim at: names like the checkpoint's, a sink log, a temp file, a subdirectory."""
    (where / "commits").mkdir(parents=True)
    (where / "commits" / "12").write_text("victim commit")
    (where / "_spark_metadata").mkdir()
    (where / "_spark_metadata" / "12").write_text("v1\n{\"path\":\"victim\"}")
    (where / ".12.wmcheck.tmp").write_text("victim temp")
    (where / "secret").write_text("do not move me")
    (where / "dir" / "inner").mkdir(parents=True)
    return where


def repaired(tmp_path: Path, **options) -> Case:
    root = copy_of(HDFS, tmp_path)
    victim = victim_dir(tmp_path / "victim")
    done = repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=10, file_sink=str(root / "output")),
                      repair.RunOptions(execute=True, idle_ms=0, **options))
    assert done.backup_id is not None
    return Case(root, victim, done.backup_id)


def refused(case: Case, match: str, **undo_options) -> CheckpointError:
    """``undo`` refuses with one line matching ``match`` and changes nothing, inside or outside."""
    before = snapshot(case.root), snapshot(case.victim)
    with pytest.raises(CheckpointError, match=match) as got:
        repair.undo_repair(str(case.ckpt), idle_ms=0, **undo_options)
    assert "\n" not in str(got.value)
    assert (snapshot(case.root), snapshot(case.victim)) == before
    return got.value


# -- links, swapped files and hard links in the backup --------------------------------------------


def link_to_victim_file(c: Case) -> None:
    c.saved(SAVED).unlink()
    c.saved(SAVED).symlink_to(c.victim / "commits" / "12")


def link_to_the_same_bytes(c: Case) -> None:
    shutil.copyfile(c.saved(SAVED), c.victim / "copy")
    c.saved(SAVED).unlink()
    c.saved(SAVED).symlink_to(c.victim / "copy")


def link_to_a_directory(c: Case) -> None:
    c.saved(SAVED).unlink()
    c.saved(SAVED).symlink_to(c.victim / "dir")


def directory_moved_out_and_linked(c: Case) -> None:
    """The backup's commits/ moved outside and a link left in its place (undo would move the outside files in)."""
    shutil.move(c.saved("files/checkpoint/commits"), c.victim / "moved")
    c.saved("files/checkpoint/commits").symlink_to(c.victim / "moved")


def root_directory_linked(c: Case) -> None:
    shutil.copytree(c.saved("files/checkpoint"), c.victim / "copied")
    shutil.rmtree(c.saved("files/checkpoint"))
    c.saved("files/checkpoint").symlink_to(c.victim / "copied")


def files_directory_linked(c: Case) -> None:
    shutil.copytree(c.saved("files"), c.victim / "files")
    shutil.rmtree(c.saved("files"))
    c.saved("files").symlink_to(c.victim / "files")


def dangling_link_added(c: Case) -> None:
    (c.saved("files/checkpoint/state/0/0") / "99.delta").symlink_to(c.victim / "nowhere")


def same_size_other_bytes(c: Case) -> None:
    data = bytearray(c.saved(SAVED).read_bytes())
    data[-1] ^= 1
    c.saved(SAVED).write_bytes(bytes(data))


def other_size(c: Case) -> None:
    c.saved(SAVED).write_bytes(c.saved(SAVED).read_bytes() + b"\n")


def hard_link_same_bytes(c: Case) -> None:
    shutil.copyfile(c.saved(SAVED), c.victim / "hard")
    c.saved(SAVED).unlink()
    os.link(c.victim / "hard", c.saved(SAVED))


def hard_link_other_bytes(c: Case) -> None:
    c.saved(SAVED).unlink()
    os.link(c.victim / "commits" / "12", c.saved(SAVED))


def sink_log_file_linked(c: Case) -> None:
    path = c.saved("files/sink/_spark_metadata/12")
    path.unlink()
    path.symlink_to(c.victim / "_spark_metadata" / "12")


def sink_directory_linked(c: Case) -> None:
    shutil.move(c.saved("files/sink/_spark_metadata"), c.victim / "sink-log")
    c.saved("files/sink/_spark_metadata").symlink_to(c.victim / "sink-log")


def saved_file_missing(c: Case) -> None:
    shutil.move(c.saved(SAVED), c.victim / "taken")


@pytest.mark.parametrize("mutate, match", [
    (link_to_victim_file, f"{SAVED}: {NO_LINK}"),
    (link_to_the_same_bytes, f"{SAVED}: {NO_LINK}"),
    (link_to_a_directory, f"{SAVED}: {NO_LINK}"),
    (directory_moved_out_and_linked, "files/checkpoint/commits: the backup holds a symbolic link where the repair saved none"),
    (root_directory_linked, "files/checkpoint: the backup holds a symbolic link where the repair saved none"),
    (files_directory_linked, r"/files: the backup holds a symbolic link where the repair saved none"),
    (dangling_link_added, "state/0/0/99.delta: the backup holds a symbolic link where the repair saved none"),
    (same_size_other_bytes, f"{SAVED}: the backup holds file of .* bytes .*, not the file of"),
    (other_size, f"{SAVED}: the backup holds file of .* bytes .*, not the file of"),
    (hard_link_same_bytes, f"{SAVED}: the backup holds a file with 2 names \\(hard links\\), 1 when it was saved"),
    (hard_link_other_bytes, f"{SAVED}: the backup holds file of"),
    (sink_log_file_linked, f"files/sink/_spark_metadata/12: {NO_LINK}"),
    (sink_directory_linked, "files/sink/_spark_metadata: the backup holds a symbolic link"),
    (saved_file_missing, f"{SAVED}: the backup holds nothing where the repair moved commits/12"),
])
def test_undo_refuses_a_tampered_backup_before_any_change(mutate, match, tmp_path):
    case = repaired(tmp_path)
    mutate(case)
    refused(case, match)


def test_the_refusal_is_one_line_naming_the_path_on_the_command_line(tmp_path):
    case = repaired(tmp_path)
    link_to_victim_file(case)
    result = run_cli("undo", case.ckpt, "--idle", "0", exit_code=2)
    assert result.stderr.startswith(f"Error: _wmcheck/backups/{case.backup_id}/{SAVED}: {NO_LINK} (hint: ")
    assert result.stderr.count("\n") == 1


def test_a_link_in_the_way_of_a_restore_is_never_followed(tmp_path):
    case = repaired(tmp_path)
    (case.ckpt / "commits" / "12").symlink_to(case.victim / "commits" / "12")
    refused(case, "commits/12 exists again")
    victim = snapshot(case.victim)
    repair.undo_repair(str(case.ckpt), idle_ms=0, force=True)  # the link itself is put aside
    assert snapshot(case.victim) == victim
    assert not (case.ckpt / "commits" / "12").is_symlink()
    assert (case.backup / "displaced" / "checkpoint" / "commits" / "12").is_symlink()


def test_a_link_in_place_of_a_rewritten_file_is_refused(tmp_path):
    root = copy_of(HDFS, tmp_path)
    victim = victim_dir(tmp_path / "victim")
    done = repair.run(str(root / "checkpoint"), repair.SetWatermarkRequest(watermark=0),
                      repair.RunOptions(execute=True, idle_ms=0))
    offsets = root / "checkpoint" / "offsets" / "12"
    shutil.copyfile(offsets, victim / "offsets")
    offsets.unlink()
    offsets.symlink_to(victim / "offsets")  # the same bytes, through a link
    refused(Case(root, victim, str(done.backup_id)), "offsets/12 \\(in the checkpoint\\) is a symbolic link: wmcheck does "
            "not change files through symbolic links")


# -- wmcheck's own directories and files ------------------------------------------------------------


def test_linked_own_directories_and_records_are_refused(tmp_path):
    case = repaired(tmp_path)
    backups = case.ckpt / "_wmcheck" / "backups"
    shutil.move(case.backup, case.victim / "backup")
    case.backup.symlink_to(case.victim / "backup")
    refused(case, f"_wmcheck/backups/{case.backup_id}: a symbolic link in wmcheck's own directory")
    case.backup.unlink()
    shutil.move(case.victim / "backup", case.backup)
    shutil.move(case.backup / "manifest.json", case.victim / "manifest.json")
    (case.backup / "manifest.json").symlink_to(case.victim / "manifest.json")
    refused(case, "manifest.json: expected a regular file, found a symbolic link")
    (case.backup / "manifest.json").unlink()
    shutil.move(case.victim / "manifest.json", case.backup / "manifest.json")
    shutil.move(backups, case.victim / "backups")
    backups.symlink_to(case.victim / "backups")
    refused(case, "_wmcheck/backups is a symbolic link")
    backups.unlink()
    shutil.move(case.victim / "backups", backups)
    (case.victim / "journal.json").write_text(json.dumps({"backup_id": case.backup_id, "action": "undo"}))
    (case.ckpt / "_wmcheck" / "journal.json").symlink_to(case.victim / "journal.json")
    refused(case, "expected the wmcheck repair journal")


# -- edited manifests, records and plans ------------------------------------------------------------


@pytest.mark.parametrize("name, change, rehash, match", [
    ("manifest.json", lambda d: d.update(files="VICTIM"), False, "the manifest does not match its checksum"),
    ("manifest.json", lambda d: d.update(status="applying"), False, "the manifest does not match its checksum"),
    ("manifest.json", lambda d: d.update(file_sink="VICTIM"), False, "the manifest does not match its checksum"),
    ("manifest.json", lambda d: d.pop("checksum"), False, "the manifest lacks its checksum"),
    ("manifest.json", lambda d: d.update(files="VICTIM"), True, "not a directory named after the backup"),
    ("manifest.json", lambda d: d.update(id="../../victim"), True, "expected a wmcheck backup manifest with an id"),
    ("entries.json", lambda d: d["entries"][0].update(sha256="0" * 64), False,
     "the record of the backup's files was changed after the repair was made"),
    ("entries.json", lambda d: d["entries"][0].update(path="../../../victim/secret"), True,
     "the backup holds a file the repair did not save"),
    ("plan.json", lambda d: d["steps"][0].update(path="../../victim/secret"), False,
     "the repair's plan was changed after the repair was made"),
    ("plan.json", lambda d: d["steps"][0].update(path="../../victim/secret"), True,
     "not a wmcheck plan: step 0: path '../../victim/secret' is not a plain path"),
    ("plan.json", lambda d: d["steps"][0].update(path="_wmcheck/journal.json"), True, "is not a plain path inside"),
])
def test_edited_records_are_refused(name, change, rehash, match, tmp_path):
    case = repaired(tmp_path)

    def edit(doc: dict) -> None:
        change(doc)
        for key in ("files", "file_sink"):
            if doc.get(key) == "VICTIM":
                doc[key] = str(case.victim)

    case.edit_json(name, edit, rehash)
    refused(case, match)


def test_a_careful_edit_naming_another_sink_is_refused(tmp_path):
    """Plan and manifest both name another file sink, every hash and the checksum made to agree: the sink recorded
    as resolved when the repair began still differs."""
    case = repaired(tmp_path)
    other = tmp_path / "other-sink"
    shutil.copytree(case.root / "output", other)
    other_before = snapshot(other)
    case.edit_json("plan.json", lambda d: d.update(file_sink=str(other)), rehash=True)
    case.edit_json("manifest.json", lambda d: d.update(file_sink=str(other)), rehash=True)
    refused(case, f"the file sink {other} led to .*/output when repair .* was made and leads to {other} now")
    assert snapshot(other) == other_before


def test_a_backup_id_with_dots_is_refused(tmp_path):
    case = repaired(tmp_path)
    refused(case, "escapes the checkpoint", backup_id="../../../victim")


# -- locations given through links ------------------------------------------------------------------


def test_a_checkpoint_given_as_a_link_that_points_elsewhere_at_undo_is_refused(tmp_path):
    root = copy_of(HDFS, tmp_path)
    link = tmp_path / "ckpt-link"
    link.symlink_to(root / "checkpoint")
    done = repair.run(str(link), repair.RewindRequest(to_batch=10), repair.RunOptions(execute=True, idle_ms=0))
    copy = tmp_path / "copy"
    shutil.copytree(root / "checkpoint", copy, symlinks=True)
    link.unlink()
    link.symlink_to(copy)
    case = Case(tmp_path, victim_dir(tmp_path / "victim"), str(done.backup_id))
    before = snapshot(root), snapshot(copy)
    with pytest.raises(CheckpointError, match=f"the checkpoint {link} led to {root / 'checkpoint'} when repair .* was "
                                              f"made and leads to {copy} now"):
        repair.undo_repair(str(link), idle_ms=0)
    assert (snapshot(root), snapshot(copy)) == before
    link.unlink()
    link.symlink_to(root / "checkpoint")
    repair.undo_repair(str(link), idle_ms=0)  # pointed back: undone
    assert case.victim.exists()


def test_a_sink_given_as_a_link_that_points_elsewhere_at_undo_is_refused(tmp_path):
    root = copy_of(HDFS, tmp_path)
    original = trees(root)
    sink = tmp_path / "sink-link"
    sink.symlink_to(root / "output")
    repair.run(str(root / "checkpoint"), repair.RewindRequest(to_batch=10, file_sink=str(sink)),
               repair.RunOptions(execute=True, idle_ms=0))
    other = tmp_path / "other-sink"
    shutil.copytree(root / "output", other)
    sink.unlink()
    sink.symlink_to(other)
    before = snapshot(root), snapshot(other)
    with pytest.raises(CheckpointError, match=f"the file sink {sink} led to {root / 'output'} when repair"):
        repair.undo_repair(str(root / "checkpoint"), idle_ms=0)
    assert (snapshot(root), snapshot(other)) == before
    sink.unlink()
    sink.symlink_to(root / "output")
    repair.undo_repair(str(root / "checkpoint"), idle_ms=0)
    assert trees(root) == original


def test_a_backup_dir_given_as_a_link_or_holding_links_is_checked(tmp_path):
    real = tmp_path / "backups-real"
    real.mkdir()
    link = tmp_path / "backups-link"
    link.symlink_to(real)
    case = repaired(tmp_path, backup_dir=str(link))
    saved = real / case.backup_id / "files" / "checkpoint" / "commits" / "12"
    saved.unlink()
    saved.symlink_to(case.victim / "commits" / "12")
    refused(case, f"files/checkpoint/commits/12: {NO_LINK}")
    saved.unlink()
    shutil.copyfile(case.ckpt / "commits" / "10", saved)  # any regular file: refused by its hash
    refused(case, "commits/12: the backup holds file of")
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(real, elsewhere)
    link.unlink()
    link.symlink_to(elsewhere)
    refused(case, f"the backup directory {link}/{case.backup_id} led to {real}/{case.backup_id} when repair")


# -- a saved plan changes what it lists, and only that ---------------------------------------------


def test_a_saved_plan_changes_its_own_sink_and_a_command_naming_another_is_refused(tmp_path):
    root = copy_of(HDFS, tmp_path)
    other = tmp_path / "other-sink"
    shutil.copytree(root / "output", other)
    plan = tmp_path / "plan.json"
    run_cli("rewind", root / "checkpoint", "--to-batch", "10", "--file-sink", other, "--plan-out", plan, "--idle", "0")
    before = snapshot(root), snapshot(other)
    result = run_cli("rewind", root / "checkpoint", "--from-plan", plan, "--file-sink", root / "output", "--execute",
                     "--idle", "0", exit_code=2)
    assert result.stderr == (f"Error: the plan changes the file sink {other}, the command names {root / 'output'}: "
                             "a saved plan changes only what it lists (hint: leave out --file-sink to apply the plan "
                             "as saved, or plan again with the sink meant)\n")
    assert (snapshot(root), snapshot(other)) == before
    done = run_cli("rewind", root / "checkpoint", "--from-plan", plan, "--execute", "--idle", "0").stdout
    assert f"file sink:      {other}" in done.split("\n")
    assert not (other / "_spark_metadata" / "12").exists()  # the plan's sink rewound, the query's own untouched
    assert (root / "output" / "_spark_metadata" / "12").exists()


def test_a_saved_plan_without_a_sink_is_refused_with_one(tmp_path):
    root = copy_of(HDFS, tmp_path)
    plan = tmp_path / "plan.json"
    run_cli("rewind", root / "checkpoint", "--to-batch", "10", "--plan-out", plan, "--idle", "0")
    result = run_cli("rewind", root / "checkpoint", "--from-plan", plan, "--file-sink", root / "output", "--execute",
                     "--idle", "0", exit_code=2)
    assert result.stderr.startswith(f"Error: the plan changes no file sink, the command names {root / 'output'}")


# -- a backup written by the previous version ---------------------------------------------------------

LEGACY_KEYS = ("id", "command", "status", "created_ms", "applied_ms", "checkpoint", "file_sink", "files", "plan_sha256",
               "request", "before", "after", "steps")


def legacy(case: Case) -> None:
    """The manifest as wmcheck wrote it before it recorded entries (exactly the keys it had), no entries.json."""
    path = case.backup / "manifest.json"
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({k: doc[k] for k in LEGACY_KEYS if k in doc}, indent=1))
    (case.backup / "entries.json").unlink()


def test_a_backup_of_the_previous_version_is_undone(tmp_path):
    original = trees(copy_of(HDFS, tmp_path, "-original"))
    case = repaired(tmp_path)
    legacy(case)
    repair.undo_repair(str(case.ckpt), idle_ms=0)
    assert trees(case.root) == original


@pytest.mark.parametrize("mutate, match", [
    (link_to_the_same_bytes, "a symbolic link where the repair saved none"),
    (other_size, f"{SAVED}: the backup holds a file of .* bytes, the plan removed one of"),
    (directory_moved_out_and_linked, "files/checkpoint/commits: the backup holds a symbolic link"),
])
def test_a_backup_of_the_previous_version_is_checked_against_its_plan(mutate, match, tmp_path):
    case = repaired(tmp_path)
    legacy(case)
    mutate(case)
    refused(case, match)
