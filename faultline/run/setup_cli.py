"""``faultline setup``: the cluster's set-up (:func:`faultline.cluster.cli.setup`), then
the queue checker's compiled code, compiled once and cached
(:func:`faultline.checkers.queue.warm`), so that no run's check pays for it."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import click

from faultline.checkers.queue import warm
from faultline.cluster import cli as cluster_cli


def _setup(**options: Any) -> None:
    assert cluster_cli.setup.callback is not None
    cluster_cli.setup.callback(**options)
    if options["stop_engine"]:
        return
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="faultline-warm-") as tmp:
        warm(Path(tmp))
    click.echo(f"setup: the checker's compiled code is ready ({time.monotonic() - started:.1f} s)")


setup = click.Command("setup", params=cluster_cli.setup.params, callback=_setup,
                      help=f"{cluster_cli.setup.help} Then compiles the checker's code (once: "
                           "it is cached).")
