"""``faultline setup`` installs what a local cluster needs; ``faultline doctor`` checks it.

Set-up is idempotent: once everything is cached it downloads nothing and prints only
that all is in place. Steps: iproute2 / iptables / chromium / libfaketime (apt-get, if missing), the
Kafka jars (mvn), Toxiproxy (go install), and a class-data-sharing archive of the broker
(built from one single-node cluster start; it halves broker start-up CPU).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from faultline.cluster import kafka_dist
from faultline.cluster.docker import engine, image
from faultline.cluster.host import clocks, ends, links, netns, runstate
from faultline.cluster.kafka_dist import Report
from faultline.errors import ClusterError, FaultlineError, SetupError
from faultline.spec import DEFAULT_KAFKA_VERSION, KafkaSpec, TestSpec, TopicSpec

#: Debian commands each backend needs (kafka_dist.DEBIAN_PACKAGES names their packages).
LOCAL_COMMANDS = ("ip", "iptables", "chromium")
DOCKER_COMMANDS = ("dockerd", "debootstrap")


def run_setup(version: str = DEFAULT_KAFKA_VERSION, home: str | None = None,
              report: Report = print, backend: str = "local") -> list[str]:  # fmt: skip
    """Install every prerequisite of ``backend``; returns what was done (empty: all was in
    place). The docker backend's also installs ``docker.io`` and starts ``dockerd`` where no
    engine runs (:mod:`faultline.cluster.docker.engine`; it keeps running)."""
    done: list[str] = []

    def note(line: str) -> None:
        done.append(line)
        report(line)

    kafka_dist.ensure_debian_commands(LOCAL_COMMANDS, note)
    if clocks.library() is None:  # preloaded into the brokers of runs with clock faults
        kafka_dist.apt_install([clocks.PACKAGE], note)
    dist = kafka_dist.ensure_kafka(version, home, note)
    if kafka_dist.java_major(dist.java) < 17:
        raise SetupError(f"{dist.java} is older than Java 17; apt-get install -y openjdk-17-jre-headless")
    kafka_dist.ensure_toxiproxy(note)
    kafka_dist.format_all_dir(dist)  # compiled once; no download
    kafka_dist.dump_log_segments(dist, note)  # for the metadata log decode
    ensure_cds(dist, note, home)
    if backend == "docker":
        engine.install(note)
        if not engine.running():
            engine.start()
            note("started dockerd; `faultline setup --stop-engine` stops it and restores the host's firewall")
        image.ensure_image(dist.version, note)
    return done


def ensure_cds(dist: kafka_dist.KafkaDist, report: Report, home: str | None = None) -> Path | None:
    """The broker's class-data archive, built once from a real single-node start.

    Needs root (the start uses a network namespace); without it, nothing is built and
    clusters simply start slower.
    """
    archive = kafka_dist.cds_archive(dist)
    if archive.exists():
        return archive
    if os.geteuid() != 0:
        report("skipped the class-data archive (needs root); clusters start slower")
        return None
    from faultline.cluster.local.cluster import LocalCluster  # local imports setup's modules

    report(f"building the class-data archive for Kafka {dist.version} (one single-node start)")
    spec = TestSpec(
        name="cds",
        kafka=KafkaSpec(version=dist.version, nodes=1, home=home),
        topic=TopicSpec(name="cds", partitions=1, replication_factor=1, min_insync_replicas=1),
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="faultline-cds-") as tmp:
        classlist = Path(tmp) / "classes.lst"
        with LocalCluster(spec, Path(tmp) / "cluster",
                          jvm_extra=[f"-XX:DumpLoadedClassList={classlist}"]) as cluster:  # fmt: skip
            cluster.create_topic()
            cluster.stop_node(1)  # a clean exit flushes the class list
        return kafka_dist.build_cds_archive(dist, classlist)


@dataclass(frozen=True, slots=True)
class Check:
    """One prerequisite: ``ok``, or what is wrong and the command that fixes it."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def doctor(version: str = DEFAULT_KAFKA_VERSION, home: str | None = None,
           backend: str = "local") -> list[Check]:  # fmt: skip
    """Check every prerequisite; nothing is changed but for the test bridge of
    :func:`network_check`, built and removed."""
    checks: list[Check] = []
    root = os.geteuid() == 0
    checks.append(Check("root", root, "running as root" if root else "not root",
                        "run as root: namespaces and iptables need it"))  # fmt: skip
    java: Path | None = None
    try:
        java = kafka_dist.find_java()
        major = kafka_dist.java_major(java)
        checks.append(Check("java", major >= 17, f"{java} (Java {major})",
                            "apt-get install -y openjdk-17-jre-headless"))  # fmt: skip
    except FaultlineError as e:
        checks.append(Check("java", False, str(e), "apt-get install -y openjdk-17-jre-headless"))
    for command in (*LOCAL_COMMANDS, *(DOCKER_COMMANDS if backend == "docker" else ())):
        path, package = kafka_dist.which(command), kafka_dist.DEBIAN_PACKAGES[command]
        checks.append(Check(command, bool(path), path or "not found", f"apt-get install -y {package}"))
    lib = clocks.library()
    checks.append(Check("libfaketime", lib is not None,
                        f"{lib} (clock faults)" if lib
                        else f"not found ({clocks.LIBRARY_GLOB}): no clock faults",
                        f"apt-get install -y {clocks.PACKAGE}"))
    home = home if home is not None else os.environ.get("KAFKA_HOME")
    if home:
        try:
            dist = kafka_dist.ensure_kafka(version, home)
            checks.append(Check("kafka", True, f"KAFKA_HOME={home} (Kafka {dist.version})"))
        except FaultlineError as e:
            checks.append(Check("kafka", False, str(e), "unset KAFKA_HOME or point it at a Kafka 4.x"))
    else:
        cached = kafka_dist.kafka_cached(version)
        mvn = shutil.which("mvn")
        checks.append(Check(
            "kafka", cached,
            f"Kafka {version} jars in {kafka_dist.kafka_libs(version)}" if cached
            else f"Kafka {version} not cached" + ("" if mvn else "; mvn not found"),
            "faultline setup" if mvn else "apt-get install -y maven && faultline setup",
        ))  # fmt: skip
    tp = kafka_dist.toxiproxy_path()
    go = kafka_dist.find_go()
    checks.append(Check("toxiproxy", tp.exists(), str(tp) if tp.exists() else "not built",
                        "faultline setup" if go else "install Go, then faultline setup"))  # fmt: skip
    if not home and java is not None and kafka_dist.kafka_cached(version):
        dist = kafka_dist.KafkaDist(version, kafka_dist.kafka_libs(version), java)
        archive = kafka_dist.cds_archive(dist)
        checks.append(Check("cds archive", archive.exists(),
                            str(archive) if archive.exists() else "not built (clusters start slower)",
                            "faultline setup"))  # fmt: skip
    checks.append(_spark_check())
    if backend == "docker":
        checks += _docker_checks(version)
    if root and kafka_dist.which("ip"):
        free = netns.free_subnets(netns.used_networks())
        checks.append(Check("subnets", bool(free), f"{len(free)} free /24s in {netns.SUPERNET}",
                            "faultline cluster down --all (or free addresses in 10.241.0.0/16)"))  # fmt: skip
        if free and kafka_dist.which("iptables"):
            checks += [network_check(), ends_check()]
        if free and kafka_dist.which("tc"):
            checks.append(latency_check())
    return checks


def _spark_check() -> Check:
    """PySpark for ``faultline analyze``: installed with the project (pyproject.toml pins it);
    it runs on the Java checked above, and the pipeline sets JAVA_HOME and PYSPARK_PYTHON
    itself (faultline/analysis/spark.py)."""
    try:
        version = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        return Check("pyspark", False, "not installed", "make setup (pip install -e .)")
    return Check("pyspark", True, f"pyspark {version} (faultline analyze)")


def _docker_checks(version: str) -> list[Check]:
    """The engine, the image, and what runs of the docker backend left on the engine."""
    if not engine.running():
        return [Check("docker engine", False, f"no engine answers on {engine.SOCKET}",
                      "faultline setup --backend docker")]  # fmt: skip
    by = " (started by faultline: faultline setup --stop-engine stops it)" if engine.started_here() else ""
    name = image.default_image(version)
    has = image.exists(name)
    checks = [Check("docker engine", True, f"answers on {engine.SOCKET}{by}"),
              Check("docker image", has, name if has else f"{name} not built",
                    "faultline setup --backend docker")]
    from faultline.cluster.docker.cluster import labelled_runs

    live = {rid for rid, s in runstate.load_all().items() if s is not None and not s.is_stale()}
    left = sorted(set(labelled_runs()) - live - runstate.foreign_runs())
    checks.append(Check("docker leftovers", not left,
                        "no container or network of a finished run" if not left
                        else f"containers or networks of finished runs {left}",
                        "the next docker run removes them (by their faultline.run label)"))  # fmt: skip
    return checks


def network_check() -> Check:
    """Three nodes on a test bridge built exactly like a run's (:mod:`.host.netns`): each
    reaches every other, and the host reaches them all. Removed afterwards; needs root.

    A TCP connect to a port nobody listens on answers "refused" when the path works, and
    times out when a firewall drops it: then the check names the firewall.
    """
    spec = TestSpec(name="doctor", kafka=KafkaSpec(nodes=3),
                    topic=TopicSpec(name="doctor", partitions=1, replication_factor=1,
                                    min_insync_replicas=1))  # fmt: skip
    with runstate.locked():
        state = runstate.claim(spec, [1, 2, 3], None)
    try:
        netns.build(state.layout, [1, 2, 3])
        lost = netns.reachability(state.layout, _UNUSED_PORT)
    except ClusterError as e:
        return Check("node network", False, f"could not build a test bridge: {e}",
                     "faultline doctor as root, with iproute2 and iptables")  # fmt: skip
    finally:
        runstate.destroy(state.run_id, state)
    return Check(
        "node network", lost is None,
        "nodes on a test bridge reach each other; the host reaches them" if lost is None else lost,
        "remove the rule or policy named (faultline never edits a firewall but its own namespaces')",
    )  # fmt: skip


@contextlib.contextmanager
def _scratch_node() -> Iterator[list[str]]:
    """A node's namespace built like a run's (its chains too), removed afterwards: the
    command prefix that runs a command in it."""
    spec = TestSpec(name="doctor", kafka=KafkaSpec(nodes=1),
                    topic=TopicSpec(name="doctor", partitions=1, replication_factor=1,
                                    min_insync_replicas=1))  # fmt: skip
    with runstate.locked():
        state = runstate.claim(spec, [1], None)
    try:
        netns.build(state.layout, [1])
        yield ["ip", "netns", "exec", state.layout.namespace(1)]
    finally:
        runstate.destroy(state.run_id, state)


def latency_check() -> Check:
    """Whether a node's namespace (built like a run's, then removed) takes a netem delay.
    Always ok: latency between brokers is no kind of the ``links`` family either way, and
    the line says why plainly (:data:`~faultline.cluster.host.links.NO_LATENCY`)."""
    with _scratch_node() as enter:
        add, remove = links.netem_probe()
        try:
            netns.run([*enter, *add])
        except ClusterError:
            return Check("broker latency", True, links.NO_LATENCY)
        netns.run([*enter, *remove])
        return Check("broker latency", True, links.NETEM_UNUSED)


def ends_check() -> Check:
    """Whether a node's namespace (built like a run's, then removed) takes the rules that
    hold transaction ends (``delay ends``: iptables' ``u32`` and ``connmark`` matches)."""
    with _scratch_node() as enter:
        try:
            for cmd in [*ends.hold_commands(1), *ends.stop_marking_commands(), *ends.release_commands()]:
                netns.run([*enter, *cmd])
        except ClusterError as e:
            return Check("held transaction ends", False, f"iptables refuses the rules of delay ends: {e}",
                         "modprobe xt_u32 xt_connmark (a kernel with iptables' u32 and connmark matches)")
        return Check("held transaction ends", True, "iptables takes the u32 and connmark rules of delay ends")


#: The discard port: nobody listens on it in a fresh namespace.
_UNUSED_PORT = 9
