"""Options several commands share: the Kafka version (refused while the arguments are
parsed, before any work), the distribution to use instead, and the backend."""

from __future__ import annotations

import click

from faultline.spec import DEFAULT_KAFKA_VERSION, kafka_version


def check_kafka_version(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """The click callback of a Kafka version option: refused while the arguments are
    parsed, before any work (:func:`~faultline.spec.kafka_version`)."""
    return None if value is None else kafka_version(value, param.opts[0])


version = click.option("--kafka-version", default=DEFAULT_KAFKA_VERSION, show_default=True,
                       callback=check_kafka_version,
                       help="Kafka version resolved from Maven Central.")  # fmt: skip
home = click.option("--kafka-home", envvar="KAFKA_HOME", default=None,
                    help="An existing Kafka distribution instead (default: $KAFKA_HOME).")  # fmt: skip
backend = click.option("--backend", type=click.Choice(["local", "docker"]), default="local",
                       show_default=True, help="The cluster backend to prepare for.")  # fmt: skip
