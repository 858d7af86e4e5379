"""The ``faultline`` command line.

Each command is a module of :mod:`faultline.commands`, listed in ``_COMMANDS``; its
module is imported only when the command runs, so ``faultline doctor`` does not pay for
bokeh. A :class:`~faultline.errors.FaultlineError`, and a usage error (an unknown
option, a value of the wrong type, a ``-f`` file that does not exist), becomes one line
on stderr and exit code 2 (``run`` and ``check`` use 1 for an invalid verdict), and so
does running out of memory; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from typing import Any

import click

from faultline.errors import FaultlineError

#: command name -> "module:attribute" of its click command.
_COMMANDS: dict[str, str] = {
    "run": "faultline.commands.run:run",
    "check": "faultline.commands.check:check",
    "report": "faultline.commands.report:report",
    "analyze": "faultline.commands.analyze:analyze_command",
    "model": "faultline.commands.model:model",
    "hunt": "faultline.commands.hunt:hunt_command",
    "setup": "faultline.commands.setup:setup",
    "doctor": "faultline.commands.doctor:doctor",
    "cluster": "faultline.commands.cluster:cluster",
    "sweep": "faultline.commands.sweep:sweep",
    "nightly": "faultline.commands.nightly:nightly",
}


class _Group(click.Group):
    """Loads commands lazily and turns FaultlineError and usage errors into one line and
    exit code 2; an interruption, and any other exception (a bug: its traceback is
    printed), exit 2 too, never 1, which says a run or a check found a violation."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        # click's own report of a usage error is four lines, the usage first
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as e:  # a bare group: its help
            e.show()
            sys.exit(e.exit_code)
        except click.ClickException as e:
            click.echo(f"faultline: error: {e.format_message()}", err=True)
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("faultline: aborted", err=True)
            sys.exit(2)
        sys.exit(rv if isinstance(rv, int) else 0)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except FaultlineError as e:
            click.echo(f"faultline: error: {e}", err=True)
            sys.exit(2)
        except (click.ClickException, click.Abort, click.exceptions.Exit, KeyboardInterrupt,
                EOFError):  # click's own ends (Exit: --help, ctx.exit) and Ctrl-C
            raise
        except MemoryError:  # not the input's fault, nor a bug: the step that ran out saved nothing
            click.echo("faultline: error: out of memory (the machine's, or this process's limit); "
                       "the step that ran out saved nothing", err=True)
            sys.exit(2)
        except Exception as e:  # a bug: not a verdict
            traceback.print_exc()
            click.echo(f"faultline: internal error: {type(e).__name__}: {e}".splitlines()[0], err=True)
            sys.exit(2)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kafka-faultline")
def main() -> None:
    """Jepsen-style fault injection against real Apache Kafka."""


if __name__ == "__main__":  # python -m faultline.cli
    main()
