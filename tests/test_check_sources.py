"""``wmcheck check`` on the logs of the file source and the file sink: entries Spark cannot read, input read again or
never, sink files gone or elsewhere (areas: checkpoint/checks/sources.py, seen_files, sink_files, log_entries)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from wmcheck.checkpoint import repair
from wmcheck.checkpoint.checks.definition import Instruction
from wmcheck.checkpoint.checks.sources import misspelled
from wmcheck.checkpoint.fs import open_fs
from wmcheck.checkpoint.locations import LISTED_FROM, present_files
from wmcheck.checkpoint.model import open_checkpoint
from wmcheck.checkpoint.validate import CHECKS, check_checkpoint

from check_breaks import (
    DAY_MS,
    LAST_BATCH_MS,
    b_last_commit_lost,
    b_log_entry,
    b_sink_ahead,
    b_sink_behind,
    b_sink_file_deleted,
    broken_copy,
    drop,
    edit_json,
    fixes,
    hand_edit,
    messages,
)
from conftest import fixture_facts, sink_at_home
from oracle_cases import (
    data_files_of,
)


def test_a_sink_log_delete_of_a_file_still_there_is_an_error_with_a_rewind_and_not_an_unlisted_file(copy_fixture):
    """WM061: Spark's readers drop a file a delete entry names; WM034 does not also call the file a leftover to move
    out (the rewind needs it: the earlier batch's log names it again)."""
    facts = fixture_facts("agg_window_hdfs")
    last = facts["last_batch"]
    root = sink_at_home(copy_fixture("agg_window_hdfs"), "agg_window_hdfs")
    b_sink_file_deleted(root, facts)
    first = json.loads((root / "output/_spark_metadata" / str(last - 1)).read_text().split("\n")[1])["path"]
    assert messages(root, sink=True) == {"WM061": (
        f"the sink's log deletes 1 data file that the query wrote (e.g. {first}, in log batch {last}): Spark's file "
        "sink never writes a delete, but its readers drop every file a delete names (CompactibleFileStreamLog."
        "allFiles), so the query's output loses those rows (tested with Spark 4.3: rows missing, the restart itself "
        f"runs). The log was edited; a rewind to before batch {last} removes the deleting log file and Spark writes "
        "that batch again")}
    assert fixes(root, sink=True)["WM061"] == repair.RewindRequest(to_batch=last - 1, file_sink=str(root / "output"))


def last_sink_entry(root: Path, batch: int) -> str:
    return json.loads((root / "output/_spark_metadata" / str(batch)).read_text().split("\n")[-1])["path"]


@pytest.mark.parametrize("key, what", [
    ("WM063", "1 entry field Spark's readers cannot read (e.g. size of {entry}: '1668', where Spark writes a number): "
              "every read of the sink fails (tested with Spark 4.3: 'No usable value for size')"),
    ("WM063-directory", '1 data file marked "isDir": true (e.g. {entry}): the sink\'s readers skip directories, so '
                        "those rows are lost to them (tested with Spark 4.3)"),
])
def test_a_sink_log_entry_spark_cannot_read_or_skips_is_an_error_with_a_rewind(copy_fixture, key, what):
    """WM063: json4s refuses a string where SinkFileStatus has a Long (every read of the sink fails); the readers skip
    an entry marked a directory."""
    root, facts = broken_copy(copy_fixture, key)
    last = facts["last_batch"]
    assert messages(root, sink=True) == {"WM063": (
        f"the sink's log has {what.format(entry=last_sink_entry(root, last))}. The query itself restarts; the log was "
        f"edited; a rewind to before batch {last} removes that log file and Spark writes that batch again")}
    assert fixes(root, sink=True)["WM063"] == repair.RewindRequest(to_batch=last - 1, file_sink=str(root / "output"))


def test_a_float_where_spark_writes_an_integer_is_read(copy_fixture):
    """json4s reads 1668.0 as 1668 (a restart probe with Spark 4.3 gave the control run's output): no finding."""
    root = sink_at_home(copy_fixture("agg_window_hdfs"), "agg_window_hdfs")
    b_log_entry("output/_spark_metadata", lambda e: e.update(size=float(e["size"])))(root, {})
    assert messages(root, sink=True) == {}


def test_a_source_log_entry_spark_cannot_read_is_an_error_to_restore(copy_fixture):
    root, _ = broken_copy(copy_fixture, "WM063-source")
    entry = json.loads((root / "checkpoint/sources/0/9.compact").read_text().split("\n")[-1])["path"]
    assert messages(root) == {"WM063": (
        f"1 field of the file source's log entries Spark cannot read (e.g. timestamp of {entry}: nothing, where Spark "
        "writes a number): Spark reads every entry of the newest compact file and the files after it when the query "
        "starts, and fails (tested with Spark 4.3: 'No usable value for timestamp'). The log was edited")}
    assert fixes(root)["WM063"] == Instruction("restore sources/0/9.compact from a backup")


SEEN_AGAIN = ("On restart Spark takes the files it has read from this log, so it sees the input files these entries "
              "stood for as new and reads them again in the next batch (tested with Spark 4.3: rows counted twice)")


def test_a_source_log_batch_without_files_is_input_read_again(copy_fixture):
    root, _ = broken_copy(copy_fixture, "WM064")
    assert messages(root) == {"WM064": (
        "sources/0: 9.compact names 9 input files not logged before it for its 10 log batches (Spark logs a batch only "
        f"for files it has not logged: lines were lost, or the file holds an earlier log batch's lines). {SEEN_AGAIN}")}
    assert fixes(root)["WM064"] == Instruction("restore sources/0/9.compact from a backup before restarting")


def test_a_source_log_entry_of_another_batch_is_still_a_file_spark_has_seen(copy_fixture):
    """The last entry of sources/0/9.compact relabelled batch 8: Spark restores the file as seen all the same (a restart
    probe with Spark 4.3 gave the control run's output), so no finding."""
    root = copy_fixture("agg_window_hdfs")
    b_log_entry("checkpoint/sources/0", lambda e: e.update(batchId=8))(root, {})
    assert messages(root) == {}


def test_a_bare_logged_path_of_an_input_file_is_input_read_again(copy_fixture):
    root, _ = broken_copy(copy_fixture, "WM064-bare-path")
    assert messages(root, sink=True) == {"WM064": (
        f"sources/0: 1 logged path without a scheme (e.g. {root}/input/run2-002.json; Spark logs and lists file: "
        f"URIs). {SEEN_AGAIN}")}


def test_a_logged_path_spelled_otherwise_than_the_listing_is_input_read_again(copy_fixture):
    """Spark matches the files it has read by the logged string: ``file:/in/run2%2D002.json`` among ``file:///in/...``
    entries is not how its listing spells ``/in/run2-002.json`` (restart probe: read again)."""
    root, _ = broken_copy(copy_fixture, "WM064-spelled")
    assert messages(root, sink=True) == {"WM064": (
        f"sources/0: 1 logged path spelled otherwise than Spark's listing spells the file (e.g. file:{root}/input/"
        f"run2%2D002.json, listed as file://{root}/input/run2-002.json; Spark matches the files it has read by that "
        f"string). {SEEN_AGAIN}")}
    assert fixes(root, sink=True)["WM064"] == Instruction("restore sources/0/9.compact from a backup before restarting")


def test_logged_paths_spelled_alike_are_not_judged_by_form():
    """Every entry in one form (``file:/`` as a query given a bare path logs them), or no form most entries share:
    nothing to tell Spark's listing by; a quoted path is judged by its quoting."""
    assert misspelled({"file:/in/a-1.json", "file:/in/a-2.json"}) == {}
    assert misspelled({"file:/in/a-1.json", "file:///in/a-2.json"}) == {}
    assert misspelled({"file:///in/a b.json", "file:///in/c%20d.json", "file:///in/%C3%A9.json", "file:///in/é.json"}) == {
        "file:///in/a b.json": "file:///in/a%20b.json", "file:///in/%C3%A9.json": "file:///in/é.json"}
    assert misspelled({"file://localhost/in/a.json", "file:///in/b.json", "file:///in/c.json"}) == {
        "file://localhost/in/a.json": "file:///in/a.json"}
    assert misspelled({"file:///in//a.json", "file:///in/./b.json", "file:///in/c.json"}) == {
        "file:///in//a.json": "file:///in/a.json", "file:///in/./b.json": "file:///in/b.json"}


def test_a_sink_entry_path_is_taken_as_spark_normalizes_it(copy_fixture):
    """Readers take a sink entry as ``new Path(new URI(path))``: repeated slashes and ``.`` segments normalized away,
    so ``file:/…//output/./part-…`` is a file of the sink (restart probe: the control run's output)."""
    root = copy_fixture("agg_window_hdfs")
    sink_at_home(root, "agg_window_hdfs")
    b_log_entry("output/_spark_metadata", lambda e: e.update(path=e["path"].replace("/output/", "//output/./")))(root, {})
    assert not {"WM033", "WM047", "WM063"} & set(messages(root, sink=True))


def test_a_sink_file_named_with_another_authority_is_lost_to_readers(copy_fixture):
    """Readers keep the logged files whose parent is the sink's directory as a Hadoop path: file://localhost/ among
    file:/// entries is another directory (restart probe: its rows missing); file:/ is the same one."""
    root, _ = broken_copy(copy_fixture, "WM063-authority")
    message = messages(root, sink=True)["WM063"]
    assert message.startswith("the sink's log has 1 data file of the sink's directory named with another scheme or "
                              f"authority than its other files (e.g. file://localhost{root}/output/part-")
    assert fixes(root, sink=True)["WM063"] == repair.RewindRequest(to_batch=11, file_sink=str(root / "output"))
    b_log_entry("output/_spark_metadata", lambda e: e.update(path=e["path"].replace("file://localhost/", "file:/")))(root, {})
    assert "WM063" not in messages(root, sink=True)


def test_a_bare_logged_path_of_a_file_that_is_gone_is_not_read_again(copy_fixture):
    root, _ = broken_copy(copy_fixture, "WM064-bare-path")
    (root / "input/run2-002.json").unlink()
    assert "WM064" not in messages(root, sink=True)




def test_a_logged_input_file_time_past_the_file_age_hides_new_files(copy_fixture):
    """WM067: a time 30 days after the last batch's in sources/0/9.compact; the rewind to before batch 11, which
    logged it (the log edited: the file's modification time on disk is the last batch's, set here so that the test does
    not depend on when the repository was checked out)."""
    root, _ = broken_copy(copy_fixture, "WM067")
    os.utime(root / "input/run2-002.json", (LAST_BATCH_MS / 1000, LAST_BATCH_MS / 1000))
    assert messages(root) == {"WM067": (
        f"sources/0: 1 logged input file with a time more than 7 days after the last batch's (2026-11-22T22:22:22.052Z), "
        f"e.g. file://{root}/input/run2-002.json at 2026-12-22T22:22:22.052Z (log batch 9). On restart the file source "
        "takes its seen files' times from the log and forgets, and never reads, any file older than the newest logged "
        "time minus maxFileAge (FileStreamSource.SeenFilesMap: 2026-12-22T22:22:22.052Z minus 7 days by default; not "
        "with latestFirst and maxFilesPerTrigger or maxBytesPerTrigger), so every input file written until "
        "2026-12-15T22:22:22.052Z is skipped without an error (tested with Spark 4.3: the new input is never read); a "
        "rewind to before batch 11, which logged it, makes Spark list and read those files again")}
    assert fixes(root)["WM067"] == repair.RewindRequest(to_batch=10)


def test_a_logged_input_file_time_of_a_skewed_clock_is_set_before_the_rewind(copy_fixture):
    """WM067: the input file's modification time on disk as far ahead as its logged time (its writer's clock): Spark
    would log it again after a rewind alone, so the fix is an instruction to set it first."""
    root, _ = broken_copy(copy_fixture, "WM067")
    ahead = (LAST_BATCH_MS + 30 * DAY_MS) / 1000
    os.utime(root / "input/run2-002.json", (ahead, ahead))
    assert fixes(root)["WM067"] == Instruction(
        "set the modification time of the input files logged with these times to when they were written (touch -m "
        f"{root}/input/run2-002.json), then rewind to batch 10 with the file sink (wmcheck rewind CKPT --to-batch 10 "
        "--file-sink SINK --execute)")
    assert "its file's modification time on disk too" in messages(root)["WM067"]


def test_an_unread_input_file_older_than_the_purge_threshold_is_never_read(copy_fixture):
    """WM071: a new file in agg_window_hdfs's input, its modification time 8 days before the newest logged time
    (2024-01-01T00:33:40Z): Spark never reads it; the instruction sets its time to now. Hidden names and logged files
    are not reported, nor a file a day older."""
    root = copy_fixture("agg_window_hdfs")
    sink_at_home(root, "agg_window_hdfs")
    newest_s = 1704069220
    for name, age_days in (("late.json", 8), ("_hidden.json", 8), (".hidden.json", 8), ("recent.json", 1)):
        path = root / "input" / name
        path.write_text('{"id":"a","ts":"2024-01-01T00:00:01Z","v":1}\n')
        os.utime(path, (newest_s - age_days * 86400, newest_s - age_days * 86400))
    os.utime(root / "input/run0-000.json", (newest_s - 30 * 86400, newest_s - 30 * 86400))  # logged: read already
    assert messages(root) == {"WM071": (
        f"1 file in the input directory {root}/input that the source has not read, e.g. {root}/input/late.json, is "
        "older than the newest time its log records minus maxFileAge (2023-12-25T00:33:40.000Z: "
        "FileStreamSource.SeenFilesMap, 7 days by default; not with latestFirst and maxFilesPerTrigger or "
        "maxBytesPerTrigger): Spark takes a file as new only when it is not older than that, so it never reads them "
        "and says nothing (tested with Spark 4.3: a new input file with a modification time a month old is not read). "
        "A file copied in with its old modification time (cp -p, rsync -t, an archive) does this")}
    assert fixes(root)["WM071"] == Instruction(
        f"set the modification time of these files to now (touch -m {root}/input/late.json) before the query lists them")
    os.utime(root / "input/late.json")
    assert messages(root) == {}


@pytest.mark.parametrize("days, found", [(6, False), (8, True)])
def test_logged_input_file_times_within_the_file_age_are_no_finding(copy_fixture, days, found):
    """Six days after the last batch's time: a file written at or after it is newer than the purge threshold; eight
    days: it is not."""
    root = copy_fixture("agg_window_hdfs")
    b_log_entry("checkpoint/sources/0", lambda e: e.update(timestamp=LAST_BATCH_MS + days * DAY_MS))(root, {})
    assert ("WM067" in messages(root)) == found


def test_a_format_2_batch_the_sink_already_has_is_an_error_with_a_rewind_with_the_sink(copy_fixture):
    """WM066: checkpoint_v2 stopped between the file sink's commit of batch 12 and commits/12."""
    root, facts = broken_copy(copy_fixture, "WM066")
    last = facts["last_batch"]
    assert messages(root, sink=True) == {"WM066": (
        f"batch {last} is planned but not committed, and the file sink has already committed it (a stop between the "
        f"sink's commit and commits/{last}). On restart Spark re-runs batch {last}, its file sink skips a batch it "
        "already has without running it, so no state store reports the state it wrote, and with checkpoint format 2 "
        "Spark fails before it commits the batch (tested with Spark 4.3: 'assertion failed: CheckpointInfo length: 0'); "
        f"a rewind to before batch {last}, with the sink, makes Spark write the batch again")}
    assert fixes(root, sink=True)["WM066"] == repair.RewindRequest(to_batch=last - 1, file_sink=str(root / "output"))


def test_the_first_sink_log_file_gone_is_a_gap_only_a_backup_fills(copy_fixture):
    """WM031 before any compact file: Spark's readers and its compaction read the sink's log from batch 0."""
    root, _ = broken_copy(copy_fixture, "WM031-first")
    assert messages(root, sink=True)["WM031"] == (
        "the file sink's log has no batch 0 although it holds batches up to 7: Spark's readers of the sink fail now "
        "(FileNotFoundException: .../_spark_metadata/0 doesn't exist), and the query fails at batch 9, its next "
        "compaction ('[BATCH_METADATA_NOT_FOUND] Unable to find batch .../_spark_metadata/0'); no committed batch comes "
        "before it, so only a backup of the log brings it back")
    assert fixes(root, sink=True)["WM031"] == Instruction(
        "restore ../output/_spark_metadata/0 from a backup; without one, start the query from a new checkpoint and an "
        "empty output directory")


def test_the_first_source_log_file_gone_is_read_at_start_and_only_a_backup_fills_it(copy_fixture):
    """WM022 before any compact file: the file source restores its seen files from log batch 0 when the query
    starts, so every committed batch depends on it."""
    root, _ = broken_copy(copy_fixture, "WM022-first")
    assert messages(root) == {"WM022": (
        "offsets/7 points at log batch 5 of sources/0, but log batch 0 is missing (the log ends at 5): Spark cannot "
        "list the files of the batch and fails, or writes new log batches over ids it already used (Spark reads the "
        "log from log batch 0 when the query starts: tested with Spark 4.3, 'sources/0/0 doesn't exist'); every "
        "committed batch read it, so only a backup brings it back")}
    assert fixes(root)["WM022"] == Instruction("restore sources/0/0 from a backup, or start the query from a new checkpoint")


def test_a_source_log_fix_names_no_rewind_spark_cannot_restart_from(copy_fixture):
    """compaction keeps offsets/10 to 12: batch 10 read log batches up to 8 only, but a rewind to it leaves offsets/10
    the last offsets file without offsets/9 ('batch 9 doesn't exist'), so log batch 9 gone is fixed by hand."""
    root = copy_fixture("compaction")
    (root / "checkpoint/sources/0/9").unlink()
    found = fixes(root)
    assert found["WM022"] == Instruction("restore sources/0/9 from a backup, or start the query from a new checkpoint")
    assert found["WM029"] == Instruction("delete sources/0/.9.crc while the query is stopped")


def test_a_log_file_of_the_other_source_is_input_read_again(copy_fixture):
    """Only the source whose log holds the other's file is named: the other's log names it among its own files."""
    root, _ = broken_copy(copy_fixture, "WM064-mixed")
    left = json.loads((root / "checkpoint/sources/0/5").read_text().split("\n")[1])["path"]
    assert messages(root)["WM064"] == (
        f"sources/1: 1 entry naming files that source 0's log names, outside the directories of this source's other "
        f"files (e.g. {left}: a log file copied from the other source's log). {SEEN_AGAIN}")
    assert fixes(root)["WM064"] == Instruction("restore sources/1/5 from a backup before restarting")


def test_a_format_1_batch_the_sink_already_has_is_the_crash_spark_recovers_from(copy_fixture):
    root = sink_at_home(copy_fixture("agg_window_hdfs"), "agg_window_hdfs")
    b_last_commit_lost(root, fixture_facts("agg_window_hdfs"))
    assert messages(root, sink=True) == {}


@pytest.mark.parametrize("offset", ["null", "{}", '{"logOffset":"9"}'])
def test_a_file_source_offset_spark_cannot_read_is_named_with_the_rewind(copy_fixture, offset):
    facts = fixture_facts("agg_window_hdfs")
    last = facts["last_batch"]
    root = copy_fixture("agg_window_hdfs")
    path = root / "checkpoint" / "offsets" / str(last)
    hand_edit(path, path.read_bytes().replace(b'{"logOffset":9}', offset.encode()))
    assert messages(root) == {"WM054": (
        f"source 0 (a file source) ends batch {last - 1} at file log batch 9 but batch {last} with {offset}, which Spark "
        f"cannot read as a file source's offset (a JSON object with a number as logOffset): offsets/{last} was edited "
        "or comes from another query. On restart Spark reads the source offsets of the last two offsets files and "
        "fails ('No usable value for logOffset'; for null a NullPointerException; tested with Spark 4.3); a rewind to "
        f"before batch {last} drops it and Spark plans the batch again")}
    assert fixes(root)["WM054"] == repair.RewindRequest(to_batch=last - 1)


def test_sink_ahead_and_behind_name_the_batches(copy_fixture, tmp_path):
    facts = fixture_facts("agg_window_hdfs")
    last = facts["last_committed_batch"]
    ahead = copy_fixture("agg_window_hdfs")
    b_sink_ahead(ahead, facts)
    text = messages(ahead, sink=True)["WM024"]
    assert f"committed batch {last + 1} but the checkpoint's last committed batch is {last}" in text
    assert fixes(ahead, sink=True)["WM024"] == repair.RewindRequest(to_batch=last, file_sink=str(ahead / "output"))
    behind = tmp_path / "behind"
    shutil.copytree(ahead, behind)
    drop(behind / "output" / "_spark_metadata" / str(last + 1))
    b_sink_behind(behind, facts)
    assert f"committed batch {last} but the file sink's log ends at batch {last - 1}" in messages(behind, sink=True)["WM025"]


def test_sink_file_checks_share_one_listing_of_the_sink(copy_fixture):
    """WM032, WM033, WM034 and WM047 find the sink's data files in one recursive listing of the sink directory, not
    one look-up per file the log names (each a round trip on an object store): no data file is looked up on its own,
    and a file that is gone is still found missing (one look-up, its own)."""
    from wmcheck.checkpoint.fs import open_fs

    root = copy_fixture("agg_window_hdfs")
    sink_at_home(root, "agg_window_hdfs")
    gone = data_files_of(root, 11)[0]
    gone.unlink()
    sink = open_fs(str(root / "output"))
    looked_up: list[str] = []
    walked: list[str] = []
    info, walk = sink.info, sink.walk
    sink.info = lambda path: looked_up.append(path) or info(path)  # type: ignore[method-assign]
    sink.walk = lambda path: walked.append(path) or walk(path)  # type: ignore[method-assign]
    codes = ("WM032", "WM033", "WM034", "WM047")
    found = check_checkpoint(open_checkpoint(str(root / "checkpoint")), sink, checks=[CHECKS[c] for c in codes])
    assert [(f.code, f.path) for f in found] == [("WM047", "../output/_spark_metadata")]
    assert walked == [""]
    assert [p for p in looked_up if not p.startswith("_spark_metadata")] == [gone.name]
    assert len(data_files_of(root, 10)) + len(data_files_of(root, 12)) > 0  # the others were found by the listing


def test_bare_logged_paths_of_a_whole_log_file_are_listed_once_and_counted(copy_fixture):
    """Every entry of sources/0/9.compact a bare path (more than one directory listing's worth), one of their files
    gone: the others are input read again."""
    root = copy_fixture("agg_window_hdfs")
    sink_at_home(root, "agg_window_hdfs")
    log = root / "checkpoint/sources/0/9.compact"
    bare = []
    for line in range(1, 11):
        edit_json(log, line, lambda e: bare.append(e.update(path=e["path"].replace("file://", "")) or e["path"]))
    Path(bare[0]).unlink()
    assert len(bare) == 10 > LISTED_FROM
    assert messages(root) == {"WM064": (
        f"sources/0: 9 logged paths without a scheme (e.g. {bare[1]}; Spark logs and lists file: URIs). {SEEN_AGAIN}")}


def test_present_files_asks_the_checkpoint_store_for_bare_paths_and_the_local_disk_for_file_uris(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text("{}")
    a, b = tmp_path / "in" / "a.json", tmp_path / "in" / "b.json"
    asked = [str(a), str(b), f"file://{a}", f"file:{b}", "relative/a.json", "s3://bucket/in/a.json", f"file://host{a}"]
    assert present_files(open_fs(str(tmp_path / "ckpt")), asked) == {
        str(a): True, str(b): False, f"file://{a}": True, f"file:{b}": False}
