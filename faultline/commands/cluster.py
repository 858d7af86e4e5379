"""``faultline cluster``: a local cluster left running for experiments by hand.

``up`` starts a cluster and a *session* (:mod:`faultline.run.session`): a run whose
workload goes on and whose faults are typed one at a time (``crash``, ``restart``,
``pause``, ``resume``, ``wipe``, ``isolate``, ``hold``, ``release``, ``heal``, ``step``),
each journaled into the session's own history; ``down`` ends it as a run ends (heal,
drain, check, report) and removes the cluster. ``up --no-session`` leaves a bare cluster
instead (a *detached* run, recorded in the state directory; nothing journals).
``status`` and ``down`` find either from any process.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from confluent_kafka import KafkaException

from faultline.cluster import backends  # noqa: F401  (each backend's clean-up, for cleanup_stale)
from faultline.cluster.host import runstate
from faultline.cluster.host.stateroot import checked_run_id
from faultline.cluster.local.cluster import LocalCluster
from faultline.errors import ClusterError, FaultlineError, SpecError
from faultline.run import session
from faultline.spec import build_spec


@click.group()
def cluster() -> None:
    """A local cluster for experiments by hand, and its faults."""


@cluster.command()
@click.option("-f", "--spec", "spec_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A YAML (or test.json) spec for the session (acks, topic, ...); options override it.")
@click.option("--nodes", type=click.IntRange(1, 5), help="Kafka nodes.  [default: 3]")
@click.option("--kafka-version", help="Kafka version resolved from Maven Central.")
@click.option("--kafka-home", envvar="KAFKA_HOME", default=None,
              help="An existing Kafka distribution instead (default: $KAFKA_HOME).")
@click.option("--heap-mb", type=int, help="Each broker's heap.  [default: 512]")
@click.option("--rate", type=float, default=100.0, show_default=True,
              help="The session's sends per second.")
@click.option("--time-limit", type=float, default=3600.0, show_default=True,
              help="Seconds after which a session nobody took down ends by itself.")
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=Path("results"),
              show_default=True, help="Results directory: the session's run goes to RESULTS/cluster/.")
@click.option("--session/--no-session", "with_session", default=True, show_default=True,
              help="Run a session (workload, journal, faults by hand); without: only the cluster.")
@click.option("--topic/--no-topic", default=True, show_default=True,
              help="With --no-session: also create the test topic (fl-queue, 3 partitions).")
def up(spec_file: Path | None, nodes: int | None, kafka_version: str | None, kafka_home: str | None,
       heap_mb: int | None, rate: float, time_limit: float, results: Path, with_session: bool,
       topic: bool) -> None:
    """Start a cluster and leave it running, with a session unless --no-session; prints
    how to reach it, and where the session's run directory is."""
    overrides: dict[str, Any] = {
        "time_limit_s": time_limit,
        "kafka": {"version": kafka_version, "nodes": nodes, "home": kafka_home, "heap_mb": heap_mb},
        "workload": {"rate": rate},
    }
    if nodes is not None:  # a topic the cluster can hold
        overrides["topic"] = {"replication_factor": min(3, nodes), "min_insync_replicas": min(2, nodes)}
    spec = build_spec(spec_file, overrides)
    if spec_file is None:
        spec = replace(spec, name="cluster")
    if spec.backend != "local":
        raise SpecError(f"faultline cluster runs the local backend, not {spec.backend!r}: "
                        "drop backend from the spec file")
    if not with_session:
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
        return
    ready = session.start(spec, results, lambda line: click.echo(line, err=True))
    _print_status(LocalCluster.attach(ready.run_id))
    click.echo(f"  session: {ready.run_dir}  ({spec.workload.rate:g} sends/s, everything journaled)")
    click.echo("\nfaults:  faultline cluster crash|restart [--unclean]|pause|resume|wipe|isolate|hold|"
               "release TARGET,\n         heal, step \"wait until isr of 0 is {leader}\"\n"
               "         (TARGET: leader of 0, followers of 0, follower of 0, controller, node 2, 2)")
    click.echo(f"end it with: faultline cluster down {ready.run_id}   (heal, drain, check, report)")


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
        if (run_dir := session.run_dir_of(rid)) is not None:
            click.echo(f"  session: {run_dir} (end it with: faultline cluster down {rid})")


@cluster.command()
@click.argument("run_id", required=False)
@click.option("--all", "all_runs", is_flag=True, help="Every session and detached cluster (from cluster up).")
def down(run_id: str | None, all_runs: bool) -> None:
    """End a session (heal, drain, check, report: prints the verdict; exit code as
    ``faultline run``'s) or a detached cluster, and remove the cluster (and any crashed
    run's leftovers)."""
    if run_id is not None:
        checked_run_id(run_id)
    with runstate.locked():
        removed = runstate.cleanup_stale()
    for rid in removed:
        click.echo(f"removed leftovers of crashed run {rid}")
    # a crashed run named by id is gone already: cleanup_stale removed it
    runs = [] if run_id in removed else _select(run_id, all_runs=all_runs, detached_only=run_id is None)
    if not runs and not removed:
        click.echo("no session or detached local cluster to take down")
    code = 0
    for rid in runs:
        if rid in session.sessions():
            code = max(code, session.request({"down": True}, rid, click.echo))
        else:
            LocalCluster.attach(rid).stop()
        click.echo(f"cluster {rid} is down")
    sys.exit(code)


def _select(run_id: str | None, *, all_runs: bool, detached_only: bool = False) -> list[str]:
    """``run_id``, or every run (``detached_only``: those ``cluster up`` left: detached
    or a session's); ClusterError for an unknown run or several without ``all_runs``."""
    states = {rid: s for rid, s in runstate.load_all().items() if s is not None}
    if run_id is not None:
        if checked_run_id(run_id) not in states:
            raise ClusterError(f"no local cluster run {run_id!r}; see faultline cluster status")
        return [run_id]
    handed = set(session.sessions())
    chosen = [rid for rid, s in states.items() if s.detached or rid in handed or not detached_only]
    if len(chosen) > 1 and not all_runs:
        raise ClusterError(f"several clusters run ({', '.join(chosen)}); name one or pass --all")
    return chosen


def _print_status(c: LocalCluster) -> None:
    d = c.describe()
    kind = "detached" if d["detached"] else (
        "run by a session" if d["run_id"] in session.sessions() else "owned by a running process")
    if d["stale"]:  # its owner died (or, detached, none of its processes is left)
        kind = "left by a crashed run: faultline cluster down removes it"
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


# -- steps by hand ---------------------------------------------------------------------

_run = click.option("--run", "run_id", metavar="RUN", help="The session's cluster, when several run.")


def _send(text: str, run_id: str | None) -> None:
    """Have the session run the step ``text``; print what it did, exit with its code."""
    sys.exit(session.request({"step": text}, run_id, click.echo))


def _verb(verb: str, what: str) -> click.Command:
    @click.command(verb, help=f"{what} TARGET: leader of P, followers of P, follower of P, "
                              "controller, node N or N (P: a partition of the test topic, or "
                              "TOPIC/P), resolved from live metadata and journaled by the session.")
    @click.argument("target", nargs=-1, required=True)
    @_run
    def command(target: tuple[str, ...], run_id: str | None) -> None:
        _send(f"{verb} {' '.join(target)}", run_id)

    return command


for _name, _what in {"crash": "SIGKILL the nodes of TARGET; they stay down until a restart.",
                     "pause": "SIGSTOP the nodes of TARGET.", "resume": "SIGCONT the nodes of TARGET.",
                     "wipe": "SIGKILL the nodes of TARGET and delete their partition data.",
                     "isolate": "Cut the nodes of TARGET off from the others (adds to any isolation).",
                     "hold": "Cut only the inter-broker traffic of TARGET's nodes: they stop fetching "
                             "but stay registered with the controller and serve clients.",
                     "release": "Lift the hold on the nodes of TARGET."}.items():
    cluster.add_command(_verb(_name, _what))


@cluster.command()
@click.argument("target", nargs=-1, required=True)
@click.option("--unclean", is_flag=True, help="Take a running node down with SIGKILL, not SIGTERM.")
@_run
def restart(target: tuple[str, ...], unclean: bool, run_id: str | None) -> None:
    """Start TARGET's nodes (stopping those that run first), journaled by the session."""
    _send(f"restart {' '.join(target)}{' unclean' if unclean else ''}", run_id)


@cluster.command()
@_run
def heal(run_id: str | None) -> None:
    """Remove every network partition and hold, journaled by the session."""
    _send("heal", run_id)


@cluster.command()
@click.argument("text", nargs=-1, required=True)
@_run
def step(text: tuple[str, ...], run_id: str | None) -> None:
    """Any step of the targeted schedule language, e.g. "wait until isr of 0 is {leader}"."""
    _send(" ".join(text), run_id)
