"""``faultline setup`` and ``faultline doctor``. (``faultline cluster`` is in
:mod:`faultline.run.cluster_cli`: its session is a run.)
"""

from __future__ import annotations

import sys

import click

from faultline.cluster.docker import engine
from faultline.cluster.setup import doctor as run_doctor
from faultline.cluster.setup import run_setup
from faultline.spec import DEFAULT_KAFKA_VERSION, kafka_version


def check_kafka_version(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """The click callback of a Kafka version option: refused while the arguments are
    parsed, before any work (:func:`~faultline.spec.kafka_version`)."""
    return None if value is None else kafka_version(value, param.opts[0])


_version = click.option("--kafka-version", default=DEFAULT_KAFKA_VERSION, show_default=True,
                        callback=check_kafka_version,
                        help="Kafka version resolved from Maven Central.")  # fmt: skip
_home = click.option("--kafka-home", envvar="KAFKA_HOME", default=None,
                     help="An existing Kafka distribution instead (default: $KAFKA_HOME).")  # fmt: skip


_backend = click.option("--backend", type=click.Choice(["local", "docker"]), default="local",
                        show_default=True, help="The cluster backend to prepare for.")  # fmt: skip


@click.command()
@_version
@_home
@_backend
@click.option("--stop-engine", is_flag=True,
              help="Only stop the dockerd an earlier set-up started, restoring the host's firewall.")
def setup(kafka_version: str, kafka_home: str | None, backend: str, stop_engine: bool) -> None:
    """Install everything a cluster of ``--backend`` needs (idempotent; no downloads once
    cached); the docker backend's starts dockerd where no engine runs."""
    if stop_engine:
        click.echo("setup: stopped dockerd, host firewall restored" if engine.stop()
                   else "setup: no dockerd faultline started is running")  # fmt: skip
        return
    done = run_setup(kafka_version, kafka_home, report=lambda line: click.echo(f"setup: {line}"),
                     backend=backend)  # fmt: skip
    if not done:
        click.echo("setup: everything is in place")


@click.command()
@_version
@_home
@_backend
def doctor(kafka_version: str, kafka_home: str | None, backend: str) -> None:
    """Check each prerequisite: ok, or what is missing and the command that fixes it."""
    checks = run_doctor(kafka_version, kafka_home, backend)
    width = max(len(c.name) for c in checks)
    for c in checks:
        mark = "ok     " if c.ok else "MISSING"
        fix = "" if c.ok or not c.fix else f"  -> {c.fix}"
        click.echo(f"{mark} {c.name:<{width}}  {c.detail}{fix}")
    if not all(c.ok for c in checks):
        sys.exit(1)
