"""Rules every command follows alike: exit codes, batch ranges, time zones, check codes, a closed output pipe."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from wmcheck.checkpoint.checks.registry import CHECKS
from wmcheck.cli.commands import COMMANDS

from conftest import fixture_checkpoint, run_cli

NAME = "agg_window_hdfs"
CKPT = fixture_checkpoint(NAME)


def test_a_damaged_file_in_a_readable_checkpoint_is_a_finding_for_check_and_a_warning_for_the_rest(copy_fixture):
    """Exit 2 is for what cannot be read at all; offsets/5 garbled is a finding for check (WM055: Spark does not read
    it on restart; the last offsets file garbled is WM001, exit 1), a warning elsewhere."""
    ckpt = copy_fixture(NAME) / "checkpoint"
    (ckpt / "offsets" / "5").write_bytes(b"garbage\n")
    assert [f["code"] for f in json.loads(run_cli("check", ckpt, "--select", "WM001,WM055", "--format", "json").stdout)] == ["WM055"]
    (ckpt / "offsets" / "12").write_bytes(b"garbage\n")
    assert [(f["code"], f["path"]) for f in json.loads(run_cli("check", ckpt, "--select", "WM001,WM055", "--format", "json",
                                                              exit_code=1).stdout)] == [("WM001", "offsets/12"), ("WM055", "offsets/5")]
    (ckpt / "offsets" / "12").unlink()
    shown = json.loads(run_cli("show", ckpt, "--format", "json").stdout)
    assert [(f["code"], f["path"]) for f in shown["findings"] if f["code"] in ("WM001", "WM055")] == [("WM055", "offsets/5")]
    rows = json.loads(run_cli("batches", ckpt, "--format", "json").stdout)
    assert (rows[5]["kind"], rows[6]["kind"]) == ("unreadable", "data")
    run_cli("timeline", ckpt, "--output", ckpt.parent / "t.svg")
    run_cli("show", ckpt.parent / "nowhere", exit_code=2)


@pytest.mark.parametrize(("args", "error"), [
    (["--from", "5", "--to", "3"], "Error: --from 5 is after --to 3 (hint: batches go up to 12)"),
    (["--from", "50"], "Error: batch 50 does not exist: the last {what} is 12 (hint: use --from 12 or less)"),
    (["--from", "-5"], "Error: --from -5: batch ids start at 0 (hint: use --from 0 or more)"),
])
@pytest.mark.parametrize("command", [["batches"], ["replay", "--plan"]])
def test_batch_ranges_follow_one_rule(command, args, error):
    what = "batch" if command == ["batches"] else "committed batch"
    result = run_cli(command[0], CKPT, *command[1:], *args, exit_code=2)
    assert result.output == error.format(what=what) + "\n"


def test_batches_refuse_an_end_beyond_the_last_batch_as_replay_does():
    assert run_cli("batches", CKPT, "--to", "50", exit_code=2).output == \
        "Error: batch 50 does not exist: the last batch is 12 (hint: use --to 12 or less)\n"
    assert run_cli("batches", CKPT, "--to", "-5", exit_code=2).output == \
        "Error: --to -5: batch ids start at 0 (hint: use --to 0 or more)\n"
    assert [r["batch"] for r in json.loads(run_cli("batches", CKPT, "--from", "10", "--format", "json").stdout)] == [10, 11, 12]


@pytest.mark.parametrize(("args", "error"), [
    (["--to-batch", "-1"], "Error: --to-batch -1 names batch -1: batch ids start at 0 (hint: the oldest batch this checkpoint can be rewound to is 0)\n"),
    (["--shift", "-20"], "Error: --shift -20 names batch -8: batch ids start at 0 (hint: the oldest batch this checkpoint can be rewound to is 0)\n"),
])
def test_rewind_to_a_negative_batch_is_refused_by_its_option(args, error):
    assert run_cli("rewind", CKPT, *args, exit_code=2).output == error


def test_an_empty_time_zone_is_refused():
    assert run_cli("show", CKPT, "--tz", "", exit_code=2).output == \
        "Error: empty time zone name (hint: use UTC, local or an IANA name like Europe/Berlin)\n"


def test_check_codes_are_named_as_they_exist():
    newest = max(CHECKS)
    unused = f"WM{int(newest[2:]) + 1:03d}"
    out = run_cli("check", CKPT, "--select", unused, exit_code=2).output
    assert out == f"Error: unknown check code(s): {unused} (hint: the codes are WM000..{newest}, each explained in docs/check.md)\n"
    assert run_cli("check", CKPT, "--select", "WM000").output.endswith(": ok: 0 error(s), 0 warning(s) from 1 checks\n")
    assert "WM000" in run_cli("check", CKPT.parent / "nowhere", "--select", "WM000", exit_code=2).output


def test_a_closed_output_pipe_ends_quietly_with_141():
    """``wmcheck batches CKPT | head -0``: the reader is gone before the first line; no message, exit 128 + SIGPIPE."""
    process = subprocess.Popen([sys.executable, "-m", "wmcheck.cli", "batches", str(CKPT)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    assert process.stdout is not None
    process.stdout.close()
    _, err = process.communicate(timeout=60)
    assert (process.returncode, err) == (141, b"")


PRELUDE = ("import atexit, sys, threading\n"
           "atexit.register(lambda: print('atexit ran', file=sys.stderr))\n"
           "sys.argv = ['wmcheck', *sys.argv[1:]]\n")


@pytest.mark.parametrize("args,code", [(["batches", str(CKPT), "--format", "json"], 0),
                                       (["check", str(CKPT), "--select", "WM000", "--strict"], 0),
                                       (["show", str(CKPT.parent / "nowhere")], 2)])
def test_the_console_script_ends_without_tearing_the_interpreter_down_yet_as_a_normal_exit_does(args, code):
    """wmcheck ends its process at once after a command (freeing every object takes a twentieth of a second
    once numpy and pyarrow are in): the atexit handlers run, the piped output is whole, the exit code kept; a
    live thread that is not a daemon (a caller's) is waited for as a normal exit does."""
    run = [sys.executable, "-c", PRELUDE + "from wmcheck.cli.main import main\nmain()", *args]
    done = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr.splitlines()[-1]) == (code, "atexit ran")
    if code == 0:
        assert done.stdout == run_cli(*args).stdout
    # the thread prints once the command's output is out (however long the command takes) and a moment more, so that
    # it is still alive when the command ends
    waiting = PRELUDE + ("written = threading.Event()\n"
                         "class Written:\n"
                         "    def __init__(self, stream): self.stream = stream\n"
                         "    def write(self, text): written.set(); return self.stream.write(text)\n"
                         "    def __getattr__(self, name): return getattr(self.stream, name)\n"
                         "sys.stdout, sys.stderr = Written(sys.stdout), Written(sys.stderr)\n"
                         "threading.Thread(target=lambda: (written.wait(60), __import__('time').sleep(0.3), "
                         "print('thread done', file=sys.stdout.stream))).start()\n"
                         "from wmcheck.cli.main import main\nmain()")
    done = subprocess.run([sys.executable, "-c", waiting, *args], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.splitlines()[-1], done.stderr.splitlines()[-1]) == (code, "thread done", "atexit ran")


ODD = (b".12.\xff-left.tmp", b".15\x1b[31m.delta.tmp")


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "github", "junit"])
def test_odd_file_names_are_escaped_in_every_format(copy_fixture, fmt):
    """A name with a byte that is not UTF-8 and one with a terminal escape, under a POSIX locale (where Python
    writes such bytes through): shown as ``\\xff`` and ``\\x1b``, the output valid UTF-8."""
    import os

    ckpt = copy_fixture(NAME) / "checkpoint"
    newest, older = os.path.join(bytes(ckpt), b"offsets", ODD[0]), os.path.join(bytes(ckpt), b"state/0/0", ODD[1])
    for path in (newest, older):
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY))
    at = os.stat(newest).st_mtime_ns - 10**9  # the rewind's warning names the newest file: always the offsets one
    os.utime(older, ns=(at, at))
    env = {**os.environ, "LC_ALL": "C", "PYTHONIOENCODING": ""}
    commands = [["check", str(ckpt), "--format", fmt]] + ([["rewind", str(ckpt), "--to-batch", "11", "--format", fmt]]
                                                           if fmt in ("table", "json", "csv") else [])
    for command in commands:
        done = subprocess.run([sys.executable, "-m", "wmcheck.cli", *command], capture_output=True, env=env, timeout=120)
        text = done.stdout.decode("utf-8")  # valid UTF-8
        assert "\x1b" not in text and "\ufffd" not in text, text
        escaped = "\\\\xff" if fmt == "json" else "\\xff"
        assert f"offsets/.12.{escaped}-left.tmp" in text, (command, text)
        assert done.returncode in (0, 1) and b"Traceback" not in done.stderr


def test_check_wraps_its_table_to_the_terminal_width(copy_fixture, monkeypatch):
    ckpt = copy_fixture(NAME) / "checkpoint"
    (ckpt / "offsets" / "12").write_bytes(b"")
    wide = run_cli("check", ckpt, exit_code=1).stdout
    assert max(map(len, wide.splitlines())) > 300  # not a terminal: lines as long as they are
    monkeypatch.setenv("COLUMNS", "120")
    out = run_cli("check", ckpt, exit_code=1).stdout
    table = out.split("\nrecommended repair:")[0].splitlines()
    assert len(table) > 6 and max(map(len, table)) <= 120
    start = table[1].index("-", table[1].index("  ", 30))  # the message column (after severity, code and path)
    words = " ".join(line[start:].split("  ")[0].strip() for line in table[2:] if line[start:].strip())
    assert "file is empty: expected a version line, then the batch metadata and the source offsets" in words


def test_durations_keep_their_milliseconds():
    from wmcheck.checkpoint.timeutil import format_duration

    assert [format_duration(ms) for ms in (24780, 57052, 8000, 0, -1500, 91_324_878_410)] == [
        "24.780s", "57.052s", "8s", "0s", "-1.500s", "1057d 1m 18.410s"]
    (row,) = json.loads(run_cli("batches", CKPT, "--from", "9", "--to", "9", "--format", "json").stdout)
    assert f"  {format_duration(row['lag_ms'])}  " in run_cli("batches", CKPT, "--from", "9", "--to", "9").stdout
    assert format_duration(row["lag_ms"]).endswith(f"{row['lag_ms'] % 60000 / 1000:.3f}s")


@pytest.mark.parametrize(("args", "error"), [
    (["state", str(CKPT), "--jobs", "0"], "Error: Invalid value for '--jobs': 0 is not in the range x>=1. (hint: see wmcheck state --help)"),
    (["show", "--format", "bogus", str(CKPT)],
     "Error: Invalid value for '--format': 'bogus' is not one of 'table', 'json', 'csv'. (hint: see wmcheck show --help)"),
    (["show"], "Error: Missing argument 'CHECKPOINT'. (hint: see wmcheck show --help)"),
    (["bogus"], "Error: No such command 'bogus'. (hint: see wmcheck --help)"),
    (["--bogus"], "Error: No such option '--bogus'. (hint: see wmcheck --help)"),
])
def test_a_usage_error_is_one_line_with_a_hint(args, error):
    """Click's usage errors (an option's value, a missing argument, an unknown command or option) read like every
    other error: one line with a hint, exit 2 (with --format json: tests/test_api.py)."""
    assert run_cli(*args, exit_code=2).output == error + "\n"
    done = subprocess.run([sys.executable, "-m", "wmcheck.cli", *args], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", error + "\n")


def test_a_batch_range_that_selects_nothing_is_refused_by_its_option(copy_fixture):
    """``--last 0``, or ``--from``/``--to`` between no batches the checkpoint holds (its oldest cleaned up): exit 2
    naming the option, as the other range errors, never an empty table."""
    assert run_cli("batches", CKPT, "--last", "0", exit_code=2).output == \
        "Error: --last 0 selects no batch (hint: use --last 1 or more)\n"
    doc = json.loads(run_cli("batches", CKPT, "--last", "0", "--format", "json", exit_code=2).stdout)
    assert (doc["error"], doc["hint"], doc["param"]) == ("--last 0 selects no batch", "use --last 1 or more", "--last")
    ckpt = copy_fixture(NAME) / "checkpoint"
    for old in range(5):
        (ckpt / "offsets" / str(old)).unlink()
        (ckpt / "commits" / str(old)).unlink()
    for args, param in ((["--to", "2"], "--to"), (["--from", "1", "--to", "3"], "--to"), (["--from", "0", "--to", "4"], "--to")):
        done = run_cli("batches", ckpt, *args, exit_code=2)
        assert done.output == f"Error: {' '.join(args)} selects no batch (hint: the checkpoint holds batches 5..12)\n"
        assert json.loads(run_cli("batches", ckpt, *args, "--format", "json", exit_code=2).stdout)["param"] == param
    assert [r["batch"] for r in json.loads(run_cli("batches", ckpt, "--to", "5", "--format", "json").stdout)] == [5]


@pytest.mark.parametrize(("args", "param", "error", "hint"), [
    (["check", "{ckpt}", "--select", "WM999"], "--select", "unknown check code(s): WM999", None),
    (["check", "{ckpt}", "--select", "WM001", "--ignore", "WM999"], "--ignore", "unknown check code(s): WM999", None),
    (["check", "{ckpt}", "--operator-lag", "soon"], "--operator-lag", "cannot read 'soon' as a duration", None),
    (["check", "{ckpt}", "--fs-option", "x"], "--fs-option", "--fs-option expects key=value, got 'x'", None),
    (["check", "{ckpt}", "--stall-batches", "0"], "--stall-batches", "Invalid value for '--stall-batches': 0 is not in the range x>=1.", None),
    (["rewind", "{ckpt}", "--to-batch", "99"], "--to-batch", "cannot rewind to batch 99: batch 99 is not committed: the last committed batch is 12",
     "the newest batch this checkpoint can be rewound to is 12"),
    (["rewind", "{ckpt}", "--to-time", "soon"], "--to-time", "cannot read 'soon' as a time", None),
    (["rewind", "{ckpt}", "--to-watermark", "0"], "--to-watermark",
     "cannot rewind: no retained batch leaves the watermark at or before 1970-01-01T00:00:00.000Z (0)",
     "the oldest batch this checkpoint can be rewound to is 0"),
    (["rewind", "{ckpt}", "--to-batch", "3", "--idle", "soon"], "--idle", "cannot read 'soon' as a duration", None),
    (["rewind", "{ckpt}", "--to-batch", "3", "--file-sink", "{ckpt}/nowhere"], "--file-sink", "file sink not found: {ckpt}/nowhere",
     "nothing is at this path: pass the path the query writes to (option 'path' of writeStream, the directory holding "
     "_spark_metadata/)"),
    (["set-watermark", "{ckpt}", "--watermark", "soon"], "--watermark", "cannot read 'soon' as a time", None),
    (["set-watermark", "{ckpt}", "--watermark", "-1 hour", "--window", "soon"], "--window", "cannot read 'soon' as a duration", None),
    (["state", "{ckpt}", "--operator", "9"], "--operator", "no stateful operator 9 in this checkpoint", None),
    (["state", "{ckpt}", "--store", "nosuch"], "--store", "no store 'nosuch' in any operator", "stores there: default"),
    (["state", "{ckpt}", "--max-memory", "0"], "--max-memory", "--max-memory expects a size such as 2G or 512M, got '0'", "e.g. --max-memory 4G"),
    (["timeline", "{ckpt}", "--output", "{ckpt}/t.txt"], "--output", "cannot write a timeline to {ckpt}/t.txt: unknown extension .txt",
     "name the output file .html, .png or .svg"),
])
def test_an_error_an_option_caused_names_it_in_one_shape_for_every_command(args, param, error, hint):
    """One line on stderr, or with --format json one object naming the option at fault, for check's own usage
    errors as for every other command's."""
    argv = [a.format(ckpt=CKPT) for a in args]
    doc = json.loads(run_cli(*argv, "--format", "json", exit_code=2).stdout)
    assert (doc["param"], doc["error"]) == (param, error.format(ckpt=CKPT))
    assert hint is None or doc["hint"] == hint
    line = run_cli(*argv, exit_code=2)
    where = f"{doc['where']}: " if doc["where"] else ""
    assert (line.stdout, line.output.count("\n")) == ("", 1)
    assert line.output.startswith(f"Error: {where}{error.format(ckpt=CKPT)} (hint: "), line.output


def test_ctrl_c_while_the_command_line_is_imported_ends_it_as_at_any_other_point():
    """SIGINT while click is being imported (the first ~0.2 s of a run): the same ``interrupted`` line and exit 130
    as later, no KeyboardInterrupt traceback."""
    hook = ("import os, runpy, signal, sys\n"
            "class Interrupt:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'click':\n"
            "            sys.meta_path.remove(self)\n"
            "            os.kill(os.getpid(), signal.SIGINT)\n"
            "sys.meta_path.insert(0, Interrupt())\n"
            "sys.argv = ['wmcheck', *sys.argv[1:]]\n"
            "runpy.run_module('wmcheck.cli', run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", hook, "show", str(CKPT)], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "\ninterrupted\n")


def test_ctrl_c_while_spark_starts_prints_the_interrupted_line_too():
    """SIGINT while replay's driver JVM starts (its standard error sent to /dev/null for the JVM's own warnings): the
    same ``interrupted`` line on the terminal's standard error and exit 130 as at any other point."""
    hook = ("import os, runpy, signal, sys, time\n"
            "from pyspark.sql import SparkSession\n"
            "def starting(self):\n"
            "    assert os.path.samefile('/proc/self/fd/2', os.devnull)\n"
            "    os.kill(os.getpid(), signal.SIGINT)\n"
            "    time.sleep(60)\n"
            "SparkSession.Builder.getOrCreate = starting\n"
            "sys.argv = ['wmcheck', *sys.argv[1:]]\n"
            "runpy.run_module('wmcheck.cli', run_name='__main__')\n")
    args = ["replay", str(CKPT), "--from", "4", "--to", "4", "--source-format", "json", "--count"]
    done = subprocess.run([sys.executable, "-c", hook, *args], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "\ninterrupted\n")


def test_replay_takes_its_options_as_one_typed_object():
    """replay's 27 options reach it as one ReplayArgs (every option a field of it); the command keeps the shared ones."""
    import dataclasses
    import inspect

    from wmcheck.cli.replay import ReplayArgs, replay

    assert replay.callback is not None
    assert list(inspect.signature(replay.callback.__wrapped__).parameters) == ["checkpoint", "opts", "fmt", "tz", "fs_options"]
    exposed = {p.name for p in replay.params if p.expose_value}
    assert exposed - {"checkpoint", "fmt", "tz", "fs_options"} == {f.name for f in dataclasses.fields(ReplayArgs)}


MAX_PARAMETERS = 8
"""The most parameters a command's function takes: past them its options come as one typed object."""


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_command_takes_more_than_a_few_parameters_its_options_object_holds_the_rest(name):
    """A command with many options takes them as one frozen dataclass (``options_object``): its function takes at most
    MAX_PARAMETERS parameters, and every option the command line gives reaches it, as a parameter or as a field of
    an options object (a parameter annotated with a dataclass of the command's module)."""
    import dataclasses
    import importlib
    import inspect

    entry = COMMANDS[name]
    module = importlib.import_module(entry.module)
    command = getattr(module, entry.attr)
    parameters = inspect.signature(command.callback).parameters
    assert len(parameters) <= MAX_PARAMETERS, list(parameters)
    objects = {p: getattr(module, str(parameter.annotation), None) for p, parameter in parameters.items()}
    objects = {p: cls for p, cls in objects.items() if isinstance(cls, type) and dataclasses.is_dataclass(cls)}
    assert all(cls.__dataclass_params__.frozen for cls in objects.values())
    fields = [f.name for cls in objects.values() for f in dataclasses.fields(cls)]
    given = [p for p in parameters if p not in objects] + fields
    assert sorted(given) == sorted(p.name for p in command.params if p.expose_value)
