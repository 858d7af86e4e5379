"""The ``faultline`` command line.

Each command lives next to what it drives and is registered here. A
:class:`~faultline.errors.FaultlineError` becomes one line on stderr and exit code 2
(``run`` and ``check`` use 1 for an invalid verdict); anything else is a bug and keeps
its traceback.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from faultline.errors import FaultlineError


class _Group(click.Group):
    """A click group that turns FaultlineError into one line and exit code 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except FaultlineError as e:
            click.echo(f"faultline: error: {e}", err=True)
            sys.exit(2)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kafka-faultline")
def main() -> None:
    """Jepsen-style fault injection against real Apache Kafka."""
