"""``faultline setup``: the cluster's set-up (:func:`faultline.cluster.setup.run_setup`),
then the queue checker's compiled code, compiled once and cached
(:func:`faultline.checkers.queue.warm`), so that no run's check pays for it."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import click

from faultline.checkers.queue import warm
from faultline.cluster.docker import engine
from faultline.cluster.setup import run_setup
from faultline.commands import options


@click.command()
@options.version
@options.home
@options.backend
@click.option("--stop-engine", is_flag=True,
              help="Only stop the dockerd an earlier set-up started, restoring the host's firewall.")
def setup(kafka_version: str, kafka_home: str | None, backend: str, stop_engine: bool) -> None:
    """Install everything a cluster of ``--backend`` needs (idempotent; no downloads once
    cached); the docker backend's starts dockerd where no engine runs. Then compiles the
    checker's code (once: it is cached)."""
    if stop_engine:
        click.echo("setup: stopped dockerd, host firewall restored" if engine.stop()
                   else "setup: no dockerd faultline started is running")  # fmt: skip
        return
    done = run_setup(kafka_version, kafka_home, report=lambda line: click.echo(f"setup: {line}"),
                     backend=backend)  # fmt: skip
    if not done:
        click.echo("setup: everything is in place")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="faultline-warm-") as tmp:
        warm(Path(tmp))
    click.echo(f"setup: the checker's compiled code is ready ({time.monotonic() - started:.1f} s)")
