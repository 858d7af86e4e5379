"""``faultline run``: build a TestSpec from options and an optional YAML file
(:func:`faultline.spec.build_spec`), run it.

Precedence: defaults < the YAML file (``--spec``, the shape of ``test.json``) < the
options given on the command line. The spec is validated once, as a whole, so every
mistake is one line naming the option (``--min-insync must be between 1 and the
replication factor 3, not 4``) and exit code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from faultline.spec import ACKS, FAULTS, build_spec


@click.command("run")
@click.option("-f", "--spec", "spec_file", type=click.Path(exists=True, dir_okay=False,
              path_type=Path), help="A YAML (or test.json) spec; options override it.")
@click.option("--name", help="Test name: results go to RESULTS/<name>/<timestamp>/.")
@click.option("--acks", type=click.Choice(ACKS), help="Producer acks.  [default: all]")
@click.option("--min-insync", type=int, help="Topic min.insync.replicas.  [default: 2]")
@click.option("--replication-factor", type=int, help="Topic replication factor.  [default: 3]")
@click.option("--partitions", type=int, help="Topic partitions.  [default: 3]")
@click.option("--unclean/--no-unclean", default=None,
              help="unclean.leader.election.enable.  [default: off]")
@click.option("--idempotence/--no-idempotence", default=None,
              help="Producer enable.idempotence (needs acks=all and retries > 0).  "
                   "[default: on where those hold, as Kafka's producer]")
@click.option("--retries", type=int,
              help="Producer retries; 0 lets definite rejections end as fail.  "
                   "[default: 2147483647]")
@click.option("--time-limit", type=float, help="Seconds of main phase.  [default: 60]")
@click.option("--rate", type=float, help="Target sends per second, 0: as fast as it goes.  "
                                         "[default: 0]")
@click.option("--client", type=click.Choice(("librdkafka", "java")),
              help="The client under test.  [default: librdkafka]")
@click.option("--producers", type=int, help="Producer clients.  [default: 2]")
@click.option("--consumers", type=int, help="Consumer clients.  [default: 1]")
@click.option("--seed", type=int, help="Seed of the nemesis schedule.  [default: 0]")
@click.option("--kafka-version", help="Apache Kafka version.")
@click.option("--nodes", type=int, help="Kafka nodes: 1, 3 or 5.  [default: 3]")
@click.option("--backend", type=click.Choice(["local", "docker"]),
              help="Nodes as JVMs in network namespaces, or as containers.  [default: local]")
@click.option("--image", help="The docker backend's image.  [default: faultline/kafka:<version>]")
@click.option("--nemesis", "nemesis", metavar="FAULTS",
              help=f"Comma-separated faults, or none. Known: {', '.join(FAULTS)}.  "
                   "[default: none]")
@click.option("--interval", type=float, help="Seconds between faults.  [default: 10]")
@click.option("--max-concurrent", type=int,
              help="At most this many faults held at once.  [default: 1]")
@click.option("--results", "results", type=click.Path(file_okay=False, path_type=Path),
              default=Path("results"), show_default=True, help="Results directory.")
def run(spec_file: Path | None, name: str | None, acks: str | None, min_insync: int | None,
        replication_factor: int | None, partitions: int | None, unclean: bool | None,
        idempotence: bool | None, retries: int | None, time_limit: float | None,
        rate: float | None, client: str | None, producers: int | None, consumers: int | None,
        seed: int | None, kafka_version: str | None, nodes: int | None, backend: str | None,
        image: str | None, nemesis: str | None,
        interval: float | None, max_concurrent: int | None, results: Path) -> None:
    """Run one test: workload and faults against a fresh cluster, then check and report.

    Exit code 0: valid; 1: invalid (a forbidden anomaly); 2: unknown or error.
    """
    overrides: dict[str, Any] = {
        "name": name,
        "seed": seed,
        "time_limit_s": time_limit,
        "backend": backend,
        "kafka": {"version": kafka_version, "nodes": nodes, "image": image},
        "topic": {"partitions": partitions, "replication_factor": replication_factor,
                  "min_insync_replicas": min_insync,
                  "unclean_leader_election_enable": unclean},
        "producer": {"acks": acks, "enable_idempotence": idempotence, "retries": retries},
        "workload": {"client": client, "producers": producers, "consumers": consumers,
                     "rate": rate},
        "nemesis": {"faults": nemesis, "interval_s": interval,
                    "max_concurrent": max_concurrent},
    }
    spec = build_spec(spec_file, overrides)

    from faultline.run.runner import run_test

    console = Console(stderr=True)
    try:
        outcome = run_test(spec, results=results, console=console)
    except KeyboardInterrupt:
        click.echo(f"faultline: interrupted; the partial run is in {results / 'latest'}",
                   err=True)
        sys.exit(2)
    for line in outcome.lines():
        click.echo(line)
    sys.exit(outcome.exit_code)
