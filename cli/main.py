"""The ``wmcheck`` command group: lazy subcommands and the one place errors become exit codes."""
from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from typing import Any

import click

from wmcheck.checkpoint.errors import CheckpointError

from .commands import COMMANDS
from .flags import cli_spelling, for_cli
from .process import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, end_process, interrupted, own_process, owned, silence_stdout
from .text import printable

EXIT_INPUT = 2


class CliError(click.ClickException):
    """A clear one-line error with exit code 2."""

    exit_code = EXIT_INPUT

    def format_message(self) -> str:
        return self.message


class WmcheckGroup(click.Group):
    """Loads subcommands on first use and translates wmcheck errors in one place."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if self._module_exists(name)]

    @staticmethod
    def _module_exists(name: str) -> bool:
        return importlib.util.find_spec(COMMANDS[name].module) is not None

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name == "help":
            return help_command
        if name not in COMMANDS or not self._module_exists(name):
            return None
        return getattr(importlib.import_module(COMMANDS[name].module), COMMANDS[name].attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name].summary) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare ``wmcheck``: its help, as ``wmcheck --help``
            click.echo(exc.ctx.get_help())
            raise click.exceptions.Exit(0) from None
        except click.UsageError as exc:  # the group's own options
            raise one_line(exc) from None

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except CheckpointError as exc:
            if debug_requested():
                raise
            raise CommandError(exc.text(cli_spelling), exc.message, exc.hint, exc.param, exc.where) from None
        except KeyboardInterrupt:  # pyspark's Ctrl-C handler (a session started) raises it
            if owned():
                interrupted()
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:
            silence_stdout()
            raise click.exceptions.Exit(EXIT_BROKEN_PIPE) from None
        except click.UsageError as exc:
            raise one_line(exc) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except OSError as exc:  # a file the command line names (an --output in a missing directory)
            if debug_requested() or exc.filename is None:
                raise
            what = f"cannot open {exc.filename}: {exc.strerror}"
            hint = "check the path: its directory must exist, and be writable for an output"
            raise CommandError(f"{what} (hint: {hint})", what, hint, None, None) from None
        except Exception as exc:  # a bug: say so in one line, keep the traceback for --debug
            if debug_requested():
                raise
            text = f"internal error: {type(exc).__name__}: {exc}"
            raise CommandError(f"{text} (rerun with --debug and report it)", text, "rerun with --debug and report it",
                               None, None) from None


class CommandError(CliError):
    """An error of a command, in one line, or with ``--format json`` as an object on stdout: ``error``, ``hint``,
    ``param`` (the option at fault), ``where`` (file, line or byte) and ``exit_code``."""

    def __init__(self, line: str, error: str, hint: str | None, param: str | None, where: str | None) -> None:
        super().__init__(printable(line))
        self.doc = {"error": printable(for_cli(error)), "hint": printable(for_cli(hint)) if hint else None,
                    "param": cli_spelling(param, None) if param and not param.startswith("-") else param,
                    "where": printable(where) if where else None, "exit_code": self.exit_code}
        self.as_json = json_requested()  # decided while the command's context is there

    def show(self, file: Any = None) -> None:
        if self.as_json:
            import json  # an error's alone (start-up of --help)

            click.echo(json.dumps(self.doc, ensure_ascii=False, indent=2))
        else:
            super().show(file)


def one_line(exc: click.UsageError) -> "CommandError":
    """A usage error (an option's value, a missing argument, an unknown command) in one line with a hint, as every
    other error; with ``--format json`` as an object without one."""
    param = exc.param.opts[0] if isinstance(exc, click.BadParameter) and exc.param is not None and exc.param.opts else None
    if json_requested():
        return CommandError(exc.format_message(), exc.format_message(), None, param, None)
    sub = exc.ctx.command_path.split(" ", 1)[1:] if exc.ctx is not None else []  # whatever the program is called
    hint = f"see {' '.join(['wmcheck', *sub])} --help"
    return CommandError(f"{exc.format_message()} (hint: {hint})", exc.format_message(), hint, param, None)


FORMAT_KEY = "wmcheck.format"


def json_requested() -> bool:
    """``--format json`` was given (its value is kept as it is parsed, before the other options)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.find_root().meta.get(FORMAT_KEY) is not None:
        return ctx.find_root().meta[FORMAT_KEY] == "json"
    args = sys.argv[1:]
    return any(a == "--format=json" or (a == "--format" and args[i + 1:i + 2] == ["json"]) for i, a in enumerate(args))


def debug_requested() -> bool:
    """``--debug`` anywhere on the command line (it may follow the subcommand)."""
    return "--debug" in sys.argv[1:] or click.get_current_context(silent=True) is not None and bool(
        click.get_current_context().find_root().meta.get("wmcheck.debug")
    )


@click.command("help")
@click.argument("command", required=False)
@click.pass_context
def help_command(ctx: click.Context, command: str | None) -> None:
    """Show the help of COMMAND (of wmcheck without one), as COMMAND --help does."""
    root = ctx.find_root()
    found = root.command.get_command(root, command) if command and isinstance(root.command, click.Group) else None
    if command is None:
        click.echo(root.get_help())
    elif found is None:
        raise click.UsageError(f"No such command {command!r}.", ctx=root)
    else:
        click.echo(found.get_help(click.Context(found, info_name=command, parent=root)))


@click.group(cls=WmcheckGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             epilog="'wmcheck help COMMAND' or 'wmcheck COMMAND --help' shows a command's options.")
@click.version_option(None, "-V", "--version", package_name="wmcheck", prog_name="wmcheck")
def cli() -> None:
    """Inspect, validate and safely repair Spark Structured Streaming checkpoints."""


def main() -> None:
    """Console-script entry point."""
    own_process()
    try:
        cli(prog_name="wmcheck")
    except BrokenPipeError:
        silence_stdout()
        end_process(EXIT_BROKEN_PIPE)
    except SystemExit as done:
        if not isinstance(done.code, (int, type(None))):
            raise
        arrow = sys.modules.get("wmcheck.checkpoint.fs.arrow")
        abandoned = arrow is not None and arrow.abandoned()  # a remote call past its deadline: exit without waiting for it
        if not abandoned and any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
            raise  # a thread of a caller's code: the interpreter waits for it
        end_process(done.code or 0, run_atexit=not abandoned)
