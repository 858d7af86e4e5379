"""The docker backend: each Kafka node a container on a network of the run's own.

It is the local backend with the nodes moved into containers, so everything that reads
a node's files or talks to the cluster through its proxies is shared
(:class:`~faultline.cluster.local.cluster.LocalCluster`): the run state and its stale-run
cleanup, Toxiproxy in front of every broker, configs and storage formatted on the host,
readiness, topics, toxics, wipe and the broker's files. What differs:

- the network: a bridge network of the engine on the run's /24 (gateway = the host's
  address, each container at the address the layout gives it);
- each node: a container of :func:`~faultline.cluster.docker.image.ensure_image`'s image
  running the broker JVM as its process 1, its directory bind-mounted at the same path
  (so ``server.properties``, data, metadata and logs are the host's files);
- Toxiproxy: a container of that image on the network too, at the layout's proxy
  address, running the host's binary (mounted read-only), its API on the container's
  loopback, which the harness reaches from inside the container's network namespace
  (:mod:`faultline.cluster.toxiproxy`): never on the host, whose users could falsify a
  run through it, and behind no firewall rule of the host (the engine rewrites those);
- faults: kill, stop, pause by the engine (``docker kill`` / ``stop`` / ``pause``);
  partitions are iptables rules in each container's network namespace, applied from the
  host with ``nsenter`` (it works on a paused container, where ``docker exec`` refuses),
  and applied again when a container starts, whose network namespace is new each time;
  degraded links (:mod:`faultline.cluster.host.links`) likewise, but not applied again:
  a container restarted has whole links.
- clocks: a broker JVM starts on the image's libfaketime with the local backend's
  environment (:func:`faultline.cluster.host.clocks.environment`), its node's offset
  directory bind-mounted read-only at the same path.

Containers and the network are testcontainers' (``DockerContainer``, ``Network``), each
container started through a wait strategy; the Docker SDK is used where testcontainers
has no API: the network's IPAM pool and each container's fixed address on it, finding a
container by name for a fault, its process and network namespace, and the clean-up by
label. Ryuk, testcontainers' reaper, is switched off (its image comes from a registry):
every container and network carries the label ``faultline.run=<run id>``, and teardown
and the next run's stale-run cleanup remove exactly those (no volume is made: the data
are bind mounts in the run's directory, removed with it). A node's container is made
anew at each start, as testcontainers starts a container once.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faultline.cluster import kafka_config, kafka_dist, toxiproxy
from faultline.cluster.docker import engine, image
from faultline.cluster.host import cleanups, clocks, netns, runstate, signals
from faultline.cluster.host.runstate import ProcId
from faultline.cluster.host.stateroot import ENV as ENV_STATE
from faultline.cluster.host.stateroot import run_id_ok, state_root
from faultline.cluster.local.cluster import LocalCluster
from faultline.cluster.protocol import Grudge
from faultline.cluster.waiting import wait_until
from faultline.errors import ClusterError, SetupError
from faultline.spec import TestSpec

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network

LABEL = "faultline.run"

_log = logging.getLogger(__name__)


_MISSING = "the docker backend needs testcontainers and the Docker SDK: pip install 'kafka-faultline[docker]'"


def _client() -> Any:
    try:
        import docker
    except ImportError as e:
        raise SetupError(_MISSING) from e
    return docker.from_env()


def _testcontainers() -> None:
    """Check that testcontainers is installed, and switch its reaper off (module
    docstring): the same switch as ``TESTCONTAINERS_RYUK_DISABLED=true``, set here in its
    configuration, which reads that variable once per process."""
    try:
        from testcontainers.core.config import testcontainers_config
    except ImportError as e:
        raise SetupError(_MISSING) from e
    testcontainers_config.ryuk_disabled = True


def _started(container: DockerContainer, what: str, log: Path) -> ProcId:
    """Start ``container`` (create it, start it, its wait strategy passed); its process 1.
    ClusterError naming ``log`` when that exits at once."""
    with contextlib.suppress(TimeoutError):  # the wait saw it exit: no process below
        container.start()
    container.reload()
    proc = ProcId.of(int(container.get_wrapped_container().attrs["State"]["Pid"]))
    if proc is None:
        raise ClusterError(f"{what} exited at once; see {log}")
    return proc


class DockerCluster(LocalCluster):
    """A Kafka cluster of ``spec.kafka.nodes`` containers (module docstring).

    Implements :class:`~faultline.cluster.protocol.Cluster` and every capability of the
    local backend: Killable, Stoppable, Pausable, Partitionable, Skewable, Toxifiable, Wipeable.
    """

    def __init__(self, spec: TestSpec, workdir: Path | str | None = None) -> None:
        super().__init__(spec, workdir)
        self._docker: Any = None
        self._network: Network | None = None
        self._image = ""
        self._faketime_lib: Path | None = None
        self._grudge: dict[int, list[int]] = {}
        self._replication: dict[int, list[int]] = {}

    # -- lifecycle ------------------------------------------------------------------

    def _prepare(self) -> None:
        if not engine.running():
            raise SetupError(f"no Docker engine answers on {engine.SOCKET}; "
                             "faultline setup --backend docker starts one")  # fmt: skip
        _testcontainers()
        self._docker = _client()
        self._image = image.ensure_image(self._spec.kafka.version, lambda _: None, self._spec.kafka.image)
        if self._spec.nemesis.skews_clocks:
            self._faketime_lib = image.faketime(self._image)

    def _cleanup_stale(self) -> None:
        """Remove the containers and networks labelled with a run that has no live state
        (runstate.cleanup_stale, just before, removed the state of every stale run), but
        for the live runs of another state root (:func:`runstate.foreign_runs`)."""
        live = {rid for rid, s in runstate.load_all().items() if s is not None and not s.is_stale()}
        live |= runstate.foreign_runs()
        remove_labelled(self._docker, lambda rid: rid not in live)

    def _build_network(self) -> None:
        from docker.types import IPAMConfig, IPAMPool
        from testcontainers.core.network import Network

        pool = IPAMPool(subnet=str(self.layout.subnet), gateway=self.layout.host_address)
        network = Network(docker_network_kw={"driver": "bridge", "ipam": IPAMConfig(pool_configs=[pool]),
                                             "labels": {LABEL: self.run_id}})  # fmt: skip
        network.name = self._network_name  # testcontainers names it at random otherwise
        self._network = network.create()

    def _container_of(self, name: str, hostname: str, address: str, **kwargs: Any) -> DockerContainer:
        """A container of the run's image labelled with the run, at ``address`` on the
        run's network (through the SDK's endpoint type: testcontainers has none), with
        the SDK's further ``kwargs``."""
        from docker.types import EndpointConfig
        from testcontainers.core.container import DockerContainer

        assert self._network is not None
        fixed = EndpointConfig(self._docker.api.api_version, ipv4_address=address)
        return DockerContainer(self._image, name=name, network=self._network).with_kwargs(
            labels={LABEL: self.run_id}, networking_config={self._network.name: fixed},
            hostname=hostname, **kwargs,
        )  # fmt: skip

    def stop(self) -> None:
        """Remove the run's containers and network (by label), then what the local
        backend removes: Toxiproxy, the run's files and state, also when the engine fails
        the first part (its error is raised after). Idempotent; Ctrl-C and SIGTERM are
        ignored while it runs."""
        state = self._state
        with signals.ignored():
            try:
                if state is not None and self._docker is not None:
                    remove_labelled(self._docker, lambda rid: rid == state.run_id)
            finally:
                super().stop()

    @property
    def _network_name(self) -> str:
        return f"{netns.PREFIX}{self.run_id}"

    # -- Toxiproxy ------------------------------------------------------------------

    @property
    def _toxiproxy_name(self) -> str:
        return f"{netns.PREFIX}{self.run_id}-tp"

    def _launch_toxiproxy(self, binary: Path) -> ProcId | None:
        """Start the run's Toxiproxy container (module docstring); its process (the
        server, the container's process 1), once it answers."""
        from faultline.cluster.docker.waits import ToxiproxyAnswers

        log = self.state.dir / "toxiproxy.log"
        log.touch()
        server = "/usr/local/bin/toxiproxy-server"
        container = (
            self._container_of(self._toxiproxy_name, "toxiproxy", self.layout.proxy_address)
            .with_command(["sh", "-c", 'exec "$@" >>"$0" 2>&1', "/toxiproxy.log",
                           server, "-host", "127.0.0.1", "-port", str(toxiproxy.API_PORT)])
            .with_volume_mapping(binary, server, "ro")
            .with_volume_mapping(log, "/toxiproxy.log", "rw")
            # the run's process marker, as on the host: it tells clean-ups of another
            # state root that this run lives (runstate.foreign_runs)
            .with_envs(**{runstate.ENV_RUN: self.run_id, ENV_STATE: str(state_root())})
            .waiting_for(ToxiproxyAnswers(log).with_startup_timeout(10))
        )  # fmt: skip
        return _started(container, "the Toxiproxy container", log)

    def _toxiproxy_netns(self) -> Path:
        """The engine's file of the Toxiproxy container's network namespace."""
        container = self._docker.containers.get(self._toxiproxy_name)
        return Path(container.attrs["NetworkSettings"]["SandboxKey"])

    # -- nodes ----------------------------------------------------------------------

    def _container_name(self, node: int) -> str:
        return self.layout.namespace(node)  # fl<run>-n<i>

    def _container(self, node: int) -> Any:
        return self._docker.containers.get(self._container_name(node))

    def _launch(self, node_id: int) -> None:
        """Start node ``node_id`` in a new container (the one of its last start removed),
        record its process (the JVM, the container's process 1) and apply its part of the
        grudge."""
        from docker.errors import NotFound
        from testcontainers.core.wait_strategies import ContainerStatusWaitStrategy

        with contextlib.suppress(NotFound):
            self._container(node_id).remove(force=True)
        node = self.node(node_id)
        log4j = kafka_dist.log4j_config()
        opts = kafka_config.jvm_options(self._spec.kafka.heap_mb, node.log_dir, log4j, self.run_id)
        java = ["java", *opts, "-cp", f"{image.LIBS}/*", "kafka.Kafka", str(node.config_file)]
        container = (
            self._container_of(self._container_name(node_id), f"n{node_id}", node.address,
                               cap_add=["NET_ADMIN"], working_dir=str(node.home))
            # process 1 is the JVM itself (exec), its output appended to stdout.log as locally
            .with_command(["sh", "-c", 'exec "$@" >>"$0" 2>&1', str(node.log_dir / "stdout.log"), *java])
            .with_volume_mapping(node.home, str(node.home), "rw")
            .with_volume_mapping(log4j, str(log4j), "ro")
            # running, or exited at once; it answers once a quorum of its peers runs too,
            # which wait_healthy waits for
            .waiting_for(ContainerStatusWaitStrategy())
        )  # fmt: skip
        clock = self._clock_env(node_id)
        if clock:  # its offset file's directory, at the same path: the file is replaced whole
            offsets = clocks.offset_file(self.state.dir, node_id).parent
            container.with_envs(**clock).with_volume_mapping(offsets, str(offsets), "ro")
        self.state.nodes[node_id] = _started(container, f"node {node_id}'s container", node.log_dir)
        if node_id in self.state.paused:
            self.state.paused.remove(node_id)
        self.state.save()
        self._apply_rules(node_id)

    def _faketime(self) -> Path:
        """Where a broker JVM finds libfaketime: the image's."""
        assert self._faketime_lib is not None, "_prepare finds it for a spec with clock faults"
        return self._faketime_lib

    def kill(self, node: int) -> None:
        with self._lock:
            container = self._container(node)
            container.reload()
            if container.status == "paused":
                container.unpause()  # a frozen process takes its SIGKILL only once thawed
            if container.status in ("running", "paused"):
                container.kill()
                self._wait_exited(node)
            if node in self.state.paused:
                self.state.paused.remove(node)
            self.state.save()

    def stop_node(self, node: int, timeout: float = 30.0) -> bool:
        with self._lock:
            container = self._container(node)
            container.reload()
            if container.status == "paused":
                container.unpause()  # a frozen process cannot shut down
            killed = False
            if container.status in ("running", "paused"):
                container.stop(timeout=int(timeout))  # SIGTERM, SIGKILL after timeout
                self._wait_exited(node)
                container.reload()
                killed = container.attrs["State"]["ExitCode"] == 137  # 128 + SIGKILL
            if node in self.state.paused:
                self.state.paused.remove(node)
            self.state.save()
            return killed

    def pause(self, node: int) -> None:
        with self._lock:
            if self.node(node).is_alive() and node not in self.state.paused:
                self._container(node).pause()
                self.state.paused.append(node)
                self.state.save()

    def resume(self, node: int) -> None:
        with self._lock:
            container = self._container(node)
            container.reload()
            if container.status == "paused":
                container.unpause()
            if node in self.state.paused:
                self.state.paused.remove(node)
                self.state.save()

    def _wait_exited(self, node: int) -> None:
        proc = self.state.nodes.get(node)
        if proc is not None and not wait_until(lambda: not proc.alive(), time.monotonic() + 30):
            raise ClusterError(f"node {node}'s container did not exit")

    # -- Partitionable --------------------------------------------------------------

    def partition(self, grudge: Grudge, replication: Grudge | None = None) -> None:
        with self._lock:
            netns.grudge_rules(self.layout, grudge, replication)  # validates the node ids
            self._grudge = {n: sorted(set(ds)) for n, ds in grudge.items()}
            self._replication = {n: sorted(set(ds)) for n, ds in (replication or {}).items()}
            netns.run_per_node(self._grudge_commands(node) for node in self.node_ids)

    def heal_network(self) -> None:
        with self._lock:
            self._grudge, self._replication = {}, {}
            netns.run_per_node(self._grudge_commands(node) for node in self.node_ids)

    def _apply_rules(self, node: int) -> None:
        """The grudge chain in a freshly started container, then its part of the grudge."""
        for cmd in [*(self._iptables(node, rule) for rule in netns.chain_rules()),
                    *self._grudge_commands(node)]:
            netns.run(cmd)

    def _grudge_commands(self, node: int) -> list[list[str]]:
        """The commands that put ``node``'s part of the grudge in place; none while it is
        down (no network namespace now: applied when it starts)."""
        proc = self.state.nodes.get(node)
        if proc is None or not proc.alive():
            return []
        return [self._iptables(node, rule)
                for rule in netns.grudge_rules(self.layout, self._grudge, self._replication)[node]]

    def _iptables(self, node: int, rule: Sequence[str]) -> list[str]:
        """The command that runs iptables ``rule`` in ``node``'s container's namespace."""
        proc = self.state.nodes[node]
        assert proc is not None
        return ["nsenter", "-t", str(proc.pid), "-n", "iptables", "-w", "5", *rule]

    def _enter(self, node: int) -> list[str] | None:
        """``nsenter`` into the container's network namespace; None while it is down (its
        namespace, and every rule in it, went with it)."""
        proc = self.state.nodes.get(node)
        if proc is None or not proc.alive():
            return None
        return ["nsenter", "-t", str(proc.pid), "-n"]

    def _reachability(self) -> str:
        """Which running node could not reach which node's controller port (probed from
        each container's network namespace, from the host for the host)."""
        def enter(node: int) -> list[str]:
            proc = self.state.nodes.get(node)
            return ["nsenter", "-t", str(proc.pid if proc else 0), "-n"]

        probes = netns.probe(self.layout, kafka_config.CONTROLLER_PORT, enter=enter)
        lost = [str(p) for p in probes if not p.reached]
        return "; ".join(lost) or "every node and the host reach every node's controller port"

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out["bridge"] = f"docker network {self._network_name}"
        out["image"] = self._image
        return out


def labelled_runs() -> list[str]:
    """Run ids on the containers and networks of the engine that carry :data:`LABEL`."""
    client = _client()
    labelled = {"label": LABEL}
    found = {c.labels.get(LABEL, "") for c in client.containers.list(all=True, filters=labelled)}
    found |= {n.attrs.get("Labels", {}).get(LABEL, "") for n in client.networks.list(filters=labelled)}
    client.close()
    return sorted(rid for rid in found if run_id_ok(rid))


def remove_containers(run_id: str) -> None:
    """Remove the containers and network of run ``run_id``, when an engine answers: so
    that whatever cleans up a crashed docker run (a local run's start, ``cluster down``)
    leaves no container, bridge or engine rule of it. With no engine, none runs; the
    engine keeps them for the docker backend's next start, which removes them."""
    if not engine.running():
        return
    try:
        remove_labelled(_client(), lambda rid: rid == run_id)
    except Exception as e:  # the engine went away, or no SDK: the next docker start retries
        _log.warning("removing the containers of run %s failed: %s", run_id, e)


cleanups.register(remove_containers)


def remove_labelled(client: Any, chosen: Callable[[str], bool]) -> list[str]:
    """Remove every container, then every network, labelled ``faultline.run=<id>`` with
    ``chosen(id)`` true; returns the run ids. Nothing without the label is looked at."""
    runs: set[str] = set()
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        rid = container.labels.get(LABEL, "")
        if run_id_ok(rid) and chosen(rid):
            runs.add(rid)
            with contextlib.suppress(Exception):  # already gone
                container.remove(force=True)
    for network in client.networks.list(filters={"label": LABEL}):
        rid = network.attrs.get("Labels", {}).get(LABEL, "")
        if run_id_ok(rid) and chosen(rid):
            runs.add(rid)
            with contextlib.suppress(Exception):
                network.remove()
    return sorted(runs)
