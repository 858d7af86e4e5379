"""``faultline doctor``: each prerequisite of a cluster, ok or what is missing and the
command that fixes it (:func:`faultline.cluster.setup.doctor`), and this machine as a Spark
worker of ``faultline sweep --master`` (:func:`faultline.sweep.spark_cells.worker_check`)."""

from __future__ import annotations

import sys

import click

from faultline.cluster.setup import doctor as run_doctor
from faultline.commands import options
from faultline.sweep.spark_cells import worker_check


@click.command()
@options.version
@options.home
@options.backend
def doctor(kafka_version: str, kafka_home: str | None, backend: str) -> None:
    """Check each prerequisite: ok, or what is missing and the command that fixes it."""
    checks = [*run_doctor(kafka_version, kafka_home, backend), worker_check()]
    width = max(len(c.name) for c in checks)
    for c in checks:
        mark = "ok     " if c.ok else "MISSING"
        fix = "" if c.ok or not c.fix else f"  -> {c.fix}"
        click.echo(f"{mark} {c.name:<{width}}  {c.detail}{fix}")
    if not all(c.ok for c in checks):
        sys.exit(1)
