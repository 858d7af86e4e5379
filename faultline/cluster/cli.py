"""``faultline setup``, ``faultline doctor`` and ``faultline cluster up|status|down``.

``cluster up`` leaves a cluster running after the command exits (a *detached* run,
recorded in the state directory); ``status`` and ``down`` find it from any process.
"""

from __future__ import annotations

import sys

import click
from confluent_kafka import KafkaException

from faultline.cluster.docker import engine
from faultline.cluster.local import runstate
from faultline.cluster.local.cluster import LocalCluster
from faultline.cluster.setup import doctor as run_doctor
from faultline.cluster.setup import run_setup
from faultline.errors import ClusterError, FaultlineError
from faultline.spec import DEFAULT_KAFKA_VERSION, KafkaSpec, TestSpec, TopicSpec

_version = click.option("--kafka-version", default=DEFAULT_KAFKA_VERSION, show_default=True,
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
        click.echo("setup: stopped dockerd, host firewall restored" if engine.started_here()
                   else "setup: faultline started no dockerd")  # fmt: skip
        engine.stop()
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


@click.group()
def cluster() -> None:
    """A local cluster for experiments by hand."""


@cluster.command()
@click.option("--nodes", type=click.IntRange(1, 5), default=3, show_default=True)
@_version
@_home
@click.option("--heap-mb", type=int, default=512, show_default=True)
@click.option("--topic/--no-topic", default=True, show_default=True,
              help="Also create the default test topic (fl-queue, 3 partitions).")  # fmt: skip
def up(nodes: int, kafka_version: str, kafka_home: str | None, heap_mb: int, topic: bool) -> None:
    """Start a cluster and leave it running; prints how to reach it."""
    rf = min(3, nodes)
    spec = TestSpec(
        name="cluster",
        kafka=KafkaSpec(version=kafka_version, nodes=nodes, home=kafka_home, heap_mb=heap_mb),
        topic=TopicSpec(replication_factor=rf, min_insync_replicas=min(2, rf)),
    )
    c = LocalCluster(spec)
    c.start()
    try:
        if topic:
            c.create_topic()
        c.detach()
    except BaseException:
        c.stop()
        raise
    _print_status(c)
    click.echo(f"\nstop it with: faultline cluster down {c.run_id}")


@cluster.command()
@click.argument("run_id", required=False)
def status(run_id: str | None) -> None:
    """Nodes, pids, addresses, proxies, topic leaders and ISR of local clusters."""
    runs = _select(run_id, all_runs=True)
    if not runs:
        click.echo("no local cluster is running")
        return
    for i, rid in enumerate(runs):
        if i:
            click.echo("")
        _print_status(LocalCluster.attach(rid))


@cluster.command()
@click.argument("run_id", required=False)
@click.option("--all", "all_runs", is_flag=True, help="Every detached cluster (from cluster up).")
def down(run_id: str | None, all_runs: bool) -> None:
    """Tear down a cluster started with ``cluster up`` (and any crashed run's leftovers)."""
    with runstate.locked():
        removed = runstate.cleanup_stale()
    for rid in removed:
        click.echo(f"removed leftovers of crashed run {rid}")
    # a crashed run named by id is gone already: cleanup_stale removed it
    runs = [] if run_id in removed else _select(run_id, all_runs=all_runs, detached_only=run_id is None)
    if not runs and not removed:
        click.echo("no detached local cluster to take down")
    for rid in runs:
        LocalCluster.attach(rid).stop()
        click.echo(f"cluster {rid} is down")


def _select(run_id: str | None, *, all_runs: bool, detached_only: bool = False) -> list[str]:
    states = {rid: s for rid, s in runstate.load_all().items() if s is not None}
    if run_id is not None:
        if run_id not in states:
            raise ClusterError(f"no local cluster run {run_id!r}; see faultline cluster status")
        return [run_id]
    chosen = [rid for rid, s in states.items() if s.detached or not detached_only]
    if len(chosen) > 1 and not all_runs:
        raise ClusterError(f"several clusters run ({', '.join(chosen)}); name one or pass --all")
    return chosen


def _print_status(c: LocalCluster) -> None:
    d = c.describe()
    kind = "detached" if d["detached"] else "owned by a running process"
    click.echo(f"cluster {d['run_id']} (Kafka {d['kafka_version']}, {kind})")
    click.echo(f"  subnet {d['subnet']} bridge in {d['bridge']}, toxiproxy {d['toxiproxy']}")
    click.echo(f"  bootstrap {d['bootstrap_servers']}")
    click.echo(f"  files {d['workdir']}")
    for n in d["nodes"]:
        state = "paused" if n["paused"] else ("up" if n["alive"] else "DOWN")
        click.echo(f"  node {n['id']}: {state:<6} pid {n['pid'] or '-':<8} {n['address']:<14} "
                   f"ns {n['namespace']:<13} proxy {n['proxy']}")  # fmt: skip
    click.echo(f"  active controller: {c.active_controller()}")
    try:
        topics = c.topics()
    except (FaultlineError, KafkaException) as e:
        click.echo(f"  topics: unavailable ({e})")
        return
    for t in topics:
        try:
            for p, s in sorted(c.leaders(t).items()):
                click.echo(f"  {t}[{p}]: leader {s.leader} isr {list(s.isr)}")
        except FaultlineError as e:
            click.echo(f"  {t}: {e}")

