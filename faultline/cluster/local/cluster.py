"""The local backend: a real Kafka cluster on this machine, each node in its own netns.

::

    with LocalCluster(spec) as cluster:       # ready when the block starts
        cluster.create_topic()
        cluster.kill(cluster.leaders(spec.topic.name)[0].leader)
    # everything is gone here: JVMs, Toxiproxy, namespaces, links, rules, state

This module owns the cluster's lifetime and its capabilities; the rest is split by
idea: :mod:`~faultline.cluster.local.node` (a node's view: address, files, process),
:mod:`~faultline.cluster.local.jvm` (configs, storage, launching a JVM),
:mod:`faultline.cluster.host.netns` (namespaces, bridge, grudges),
:mod:`~faultline.cluster.host.runstate` (the run's state, and how leftovers of a crashed run
are found and removed), :mod:`~faultline.cluster.host.signals`. Needs root (namespaces,
iptables).

Files of node ``i`` live in ``<workdir>/n<i>/``: ``server.properties``, ``data/``
(``log.dirs``), ``metadata/`` (``metadata.log.dir``), ``logs/`` (server.log, ...). With
no ``workdir`` they live in the run's state directory and are removed at teardown;
a caller's ``workdir`` is left in place.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from confluent_kafka import KafkaException

from faultline.cluster import kafka_client, kafka_config, kafka_dist
from faultline.cluster.admin_child import AdminChild
from faultline.cluster.host import clocks, ends, links, netns, runstate, signals
from faultline.cluster.host.runstate import ENV_RUN, ProcId, RunState
from faultline.cluster.local.jvm import Jvms, tail_file
from faultline.cluster.local.node import LocalNode
from faultline.cluster.protocol import Grudge, PartitionState
from faultline.cluster.toxiproxy import API_PORT, ToxiproxyClient, start_server
from faultline.cluster.waiting import poll_until, wait_until
from faultline.errors import ClusterError, SetupError
from faultline.spec import TestSpec, TopicSpec

_log = logging.getLogger(__name__)


class LocalCluster:
    """A Kafka cluster of ``spec.kafka.nodes`` nodes in network namespaces.

    Implements :class:`~faultline.cluster.protocol.Cluster` and every capability
    (Killable, Stoppable, Pausable, Partitionable, Degradable, Skewable, Toxifiable, Wipeable). The
    constructor does nothing; :meth:`start` (or ``with``) brings the cluster up. Methods
    are safe to call from several threads.
    """

    def __init__(
        self, spec: TestSpec, workdir: Path | str | None = None, *, jvm_extra: Sequence[str] = ()
    ) -> None:
        """``jvm_extra``: more broker JVM flags (e.g. a ``-javaagent``), appended last."""
        self._spec = spec
        self._jvms = Jvms(spec, jvm_extra)
        self._workdir = Path(workdir).resolve() if workdir is not None else None
        self._state: RunState | None = None
        self._toxiproxy: ToxiproxyClient | None = None
        self._popen: dict[str, subprocess.Popen[bytes]] = {}
        self._lock = threading.RLock()
        self._admin: AdminChild | None = None  # closed at stop
        self._toxic_seq = 0
        self._end_holds = 0  # the holds of transaction ends so far: each marks with its number
        self._restore_signals: Callable[[], None] = lambda: None
        self._last_seen: set[int] = set()  # brokers registered at the last look
        #: Seconds each step of the last start() took (network, toxiproxy, format, ready, ...).
        self.startup_timings: dict[str, float] = {}
        #: Run ids of crashed runs whose leftovers the last start() removed first.
        self.removed_leftovers: list[str] = []

    # -- identity -------------------------------------------------------------------

    @property
    def spec(self) -> TestSpec:
        return self._spec

    @property
    def state(self) -> RunState:
        if self._state is None:
            raise ClusterError("the cluster is not running: call start() first")
        return self._state

    @property
    def run_id(self) -> str:
        return self.state.run_id

    @property
    def layout(self) -> netns.Layout:
        return self.state.layout

    @property
    def workdir(self) -> Path:
        return Path(self.state.workdir)

    @property
    def node_ids(self) -> tuple[int, ...]:
        return tuple(range(1, self._spec.kafka.nodes + 1))

    @property
    def nodes(self) -> Sequence[LocalNode]:
        return [LocalNode(self, i) for i in self.node_ids]

    def node(self, node_id: int) -> LocalNode:
        if node_id not in self.node_ids:
            raise KeyError(f"no node {node_id}; nodes are {list(self.node_ids)}")
        return LocalNode(self, node_id)

    def bootstrap_servers(self) -> str:
        return ",".join(self.node(i).proxy for i in self.node_ids)

    @property
    def toxiproxy(self) -> ToxiproxyClient:
        if self._toxiproxy is None:
            self._toxiproxy = ToxiproxyClient("127.0.0.1", self.state.toxiproxy_port,
                                              netns=self._toxiproxy_netns())
        return self._toxiproxy

    # -- attaching to a run of another process (faultline cluster status/down) ---------

    @classmethod
    def attach(cls, run_id: str) -> LocalCluster:
        """A handle on a running cluster recorded in the state directory (e.g. one left
        by ``faultline cluster up``). ClusterError if there is no such run."""
        try:
            state = RunState.load(run_id)
        except (OSError, ValueError, KeyError) as e:
            raise ClusterError(f"no local cluster run {run_id!r} ({e})") from None
        cluster = cls(TestSpec.from_mapping(state.spec, source=f"run {run_id}"), state.workdir)
        cluster._state = state
        return cluster

    def detach(self) -> None:
        """Leave the cluster running after this process exits; ``faultline cluster down``
        (or :meth:`stop` on an attached handle) removes it."""
        with self._lock:
            self.state.detached = True
            self.state.owner = None
            self.state.save()

    # -- lifecycle ------------------------------------------------------------------

    def __enter__(self) -> Self:
        self._restore_signals = signals.term_raises_exit()
        try:
            self.start()
        except BaseException:
            self._restore_signals()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.stop()
        finally:
            self._restore_signals()

    def start(self, timeout: float = 60.0) -> None:
        """Bring the cluster up: namespaces, Toxiproxy and proxies, formatted storage, one
        JVM per node; return once ready (see :meth:`wait_healthy`). On any failure,
        everything created so far is removed before the error propagates."""
        if self._state is not None:
            raise ClusterError(f"cluster {self._state.run_id} is already started")
        self._jvms.dist  # noqa: B018 - resolve (install) the distribution first
        toxiproxy_bin = kafka_dist.ensure_toxiproxy()
        self._prepare()
        with runstate.locked():
            self.removed_leftovers = runstate.cleanup_stale()
            self._cleanup_stale()
            self._state = runstate.claim(self._spec, list(self.node_ids), self._workdir)
        for rid in self.removed_leftovers:
            _log.warning("removed leftovers of crashed run %s", rid)
        steps: list[tuple[str, Callable[[], None]]] = [
            ("network", self._build_network),
            ("toxiproxy", lambda: self._start_toxiproxy(toxiproxy_bin)),
            ("configs", lambda: self._jvms.write_configs(
                self.nodes, {n.id: n.address for n in self.nodes}, {n.id: n.proxy for n in self.nodes})),
            ("format", lambda: self._jvms.format_storage(self.nodes, self.state.cluster_id, self.run_id)),
            ("launch", self._launch_all),
            ("ready", lambda: self.wait_healthy(timeout)),
        ]
        try:
            for name, step in steps:
                t0 = time.monotonic()
                step()
                self.startup_timings[name] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise

    def _prepare(self) -> None:
        """What this backend needs before a run is claimed; SetupError if it is missing."""
        if os.geteuid() != 0:
            raise SetupError("the local backend needs root (network namespaces, iptables)")
        kafka_dist.ensure_iptables()

    def _cleanup_stale(self) -> None:
        """Remove what stale runs left beyond :func:`runstate.cleanup_stale` (nothing here)."""

    def _build_network(self) -> None:
        netns.build(self.layout, self.node_ids)

    def stop(self) -> None:
        """Remove the JVMs, Toxiproxy, namespaces, bridge, veths, rules and state of this
        run. Idempotent; Ctrl-C and SIGTERM are ignored while it runs (it takes < 5 s)."""
        with self._lock, signals.ignored():
            if self._admin is not None:
                self._admin.close()
                self._admin = None
            state, self._state = self._state, None
            if state is None:
                return
            if self._toxiproxy is not None:
                self._toxiproxy.close()
                self._toxiproxy = None
            runstate.destroy(state.run_id, state)
            for proc in self._popen.values():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=1)
            self._popen.clear()

    def _start_toxiproxy(self, binary: Path) -> None:
        state = self.state
        state.toxiproxy, state.toxiproxy_port = self._launch_toxiproxy(binary), API_PORT
        state.save()
        for i in self.node_ids:
            info = self.toxiproxy.create_proxy(
                f"n{i}", f"{self.layout.proxy_address}:0",
                f"{self.layout.address(i)}:{kafka_config.CLIENT_PORT}",
            )  # fmt: skip
            state.proxy_ports[i] = info.port
        state.save()

    def _launch_toxiproxy(self, binary: Path) -> ProcId | None:
        """Start the run's Toxiproxy server in the bridge's namespace, so that only the run
        reaches its API (:mod:`faultline.cluster.toxiproxy`); its process, once it answers."""
        proc = start_server(binary, self.layout.bridge_namespace, self.state.dir / "toxiproxy.log",
                            {ENV_RUN: self.run_id})  # fmt: skip
        self._popen["toxiproxy"] = proc
        return ProcId.of(proc.pid)

    def _toxiproxy_netns(self) -> Path:
        """The file of the network namespace the run's Toxiproxy server runs in."""
        return Path("/run/netns") / self.layout.bridge_namespace

    def _launch_all(self) -> None:
        for i in self.node_ids:
            self._launch(i)

    def _launch(self, node_id: int) -> None:
        """Start node ``node_id``'s JVM (:meth:`Jvms.launch`), on libfaketime when the spec
        has clock faults (its clock as its offset file says, true at first), and record it."""
        proc = self._jvms.launch(self.node(node_id), self.run_id, self._clock_env(node_id))
        self._popen[f"n{node_id}"] = proc
        self.state.nodes[node_id] = ProcId.of(proc.pid)
        if node_id in self.state.paused:
            self.state.paused.remove(node_id)
        self.state.save()

    # -- readiness ------------------------------------------------------------------

    def admin(self) -> AdminChild:
        """The harness's admin client (through the proxies, like every client), in a child
        process of its own."""
        with self._lock:
            if self._admin is None:
                self._admin = AdminChild(self.bootstrap_servers())
            return self._admin

    def registered_brokers(self, timeout: float = 5.0) -> set[int]:
        """Ids of the brokers the cluster metadata lists: registered and unfenced."""
        return self.admin().call(kafka_client.registered_brokers, timeout)

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Every broker registered and unfenced, then a produce/consume round trip through
        every node's proxy. ClusterError naming what never happened, or a node that died."""
        deadline = time.monotonic() + timeout
        want = set(self.node_ids)
        poll_until(
            lambda: self._dead_check() or self._registered_or_none(want),
            deadline,
            lambda: f"brokers {sorted(want)} never all registered and unfenced within {timeout:.0f} s "
            f"(last seen: {sorted(self._last_seen)}); {self._reachability()}",
        )
        try:
            self.admin().call(kafka_client.create_health_topic, self.node_ids)
        except KafkaException as e:  # no answer: the admin child died, or was busy
            raise ClusterError(f"cannot create topic {kafka_client.HEALTH_TOPIC}: {e}") from None
        poll_until(
            lambda: self._all_led(kafka_client.HEALTH_TOPIC, len(self.node_ids)), deadline,
            lambda: f"{kafka_client.HEALTH_TOPIC} never had a leader on every partition",
        )  # fmt: skip
        last: list[str] = [""]

        def round_trip() -> bool:
            try:
                kafka_client.round_trip(self.bootstrap_servers(), len(self.node_ids),
                                        min(10.0, max(1.0, deadline - time.monotonic())))
                return True
            except (ClusterError, KafkaException) as e:
                last[0] = str(e)
                return False

        poll_until(
            lambda: self._dead_check() or round_trip(), deadline,
            lambda: f"no produce/consume round trip through the proxies within {timeout:.0f} s: {last[0]}",
        )  # fmt: skip

    def _reachability(self) -> str:
        """For an error message: whether the nodes (and the host) reach each node's
        controller port; if not, who could not reach whom and what could drop it."""
        lost = netns.reachability(self.layout, kafka_config.CONTROLLER_PORT)
        return lost or "every node and the host reach every node's controller port"

    def _registered_or_none(self, want: set[int]) -> bool:
        try:
            self._last_seen = self.registered_brokers(timeout=2.0)
        except KafkaException:
            return False
        return self._last_seen >= want

    def _dead_check(self) -> bool:
        """Raise if a node that should run has died (a config error shows here at once)."""
        for i in self.node_ids:
            proc = self.state.nodes.get(i)
            if proc is not None and not proc.alive():
                self._reap(i)
                out = self.node(i).log_dir / "stdout.log"
                raise ClusterError(
                    f"node {i} exited while waiting for the cluster; {out}: {tail_file(out)}"
                )
        return False

    def _all_led(self, topic: str, partitions: int) -> bool:
        try:
            state = self.leaders(topic)
        except (ClusterError, KafkaException):
            return False
        return len(state) == partitions and all(s.leader is not None for s in state.values())

    # -- topics and metadata ----------------------------------------------------------

    def create_topic(self, topic: TopicSpec | None = None, timeout: float = 60.0) -> None:
        topic = topic or self._spec.topic
        try:
            self.admin().call(kafka_client.create_topic, topic, timeout)
        except KafkaException as e:  # no answer: the admin child died, or was busy
            raise ClusterError(f"cannot create topic {topic.name}: {e}") from None
        self.wait_full_isr(topic.name, timeout)

    def wait_full_isr(self, topic: str, timeout: float = 60.0) -> None:
        """Every partition of ``topic`` led and with all its replicas in the ISR."""
        last: list[dict[int, PartitionState]] = [{}]

        def full() -> bool:
            try:
                last[0] = self.leaders(topic)
            except (ClusterError, KafkaException):
                return False
            return bool(last[0]) and all(s.full for s in last[0].values())

        poll_until(
            full, time.monotonic() + timeout,
            lambda: f"{topic} never had a leader and a full ISR on every partition within "
            f"{timeout:.0f} s (last: {_fmt_leaders(last[0])})",
        )  # fmt: skip

    def leaders(self, topic: str) -> dict[int, PartitionState]:
        """partition -> (leader, isr, replicas) from the cluster metadata, via the proxies."""
        return self.admin().call(kafka_client.partition_states, topic)

    def active_controller(self) -> int | None:
        """The KRaft leader with the highest epoch among the nodes' ``quorum-state`` files.

        Read from disk, so it works during partitions; it can lag an election by the
        quorum's election timeout.
        """
        best: tuple[int, int | None] = (-1, None)
        for node in self.nodes:
            path = node.metadata_dir / "__cluster_metadata-0" / "quorum-state"
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            epoch, leader = int(data.get("leaderEpoch", -1)), int(data.get("leaderId", -1))
            if epoch > best[0]:
                best = (epoch, leader if leader >= 0 else None)
        return best[1]

    # -- Killable, Stoppable, Pausable ------------------------------------------------

    def kill(self, node: int) -> None:
        with self._lock:
            proc = self._proc(node)
            if proc is not None and proc.alive():
                gone = runstate.kill_and_wait([proc.pid], timeout=10)
                self._reap(node)
                if not gone:
                    raise ClusterError(f"node {node} (pid {proc.pid}) still runs 10 s after its SIGKILL")
            if node in self.state.paused:
                self.state.paused.remove(node)
            self.state.save()

    def start_node(self, node: int) -> None:
        with self._lock:
            if not self.node(node).is_alive():
                self._launch(node)

    def stop_node(self, node: int, timeout: float = 30.0) -> bool:
        with self._lock:
            proc = self._proc(node)
            if proc is None or not proc.alive():
                return False
            os.kill(proc.pid, signal.SIGTERM)
            if node in self.state.paused:
                os.kill(proc.pid, signal.SIGCONT)  # a stopped process cannot shut down
                self.state.paused.remove(node)
            def exited() -> bool:
                self._reap(node)
                return not proc.alive()

            killed = not wait_until(exited, time.monotonic() + timeout)
            if killed and not runstate.kill_and_wait([proc.pid]):
                raise ClusterError(f"node {node} (pid {proc.pid}) still runs after SIGTERM and SIGKILL")
            self._reap(node)
            self.state.save()
            return killed

    def pause(self, node: int) -> None:
        with self._lock:
            proc = self._proc(node)
            if proc is not None and proc.alive() and node not in self.state.paused:
                os.kill(proc.pid, signal.SIGSTOP)
                if not runstate.wait_state(proc.pid, stopped=True):
                    raise ClusterError(f"node {node} (pid {proc.pid}) did not stop on SIGSTOP")
                self.state.paused.append(node)
                self.state.save()

    def resume(self, node: int) -> None:
        with self._lock:
            proc = self._proc(node)
            if proc is not None and proc.alive():
                os.kill(proc.pid, signal.SIGCONT)
                runstate.wait_state(proc.pid, stopped=False)
            if node in self.state.paused:
                self.state.paused.remove(node)
                self.state.save()

    def _proc(self, node: int) -> runstate.ProcId | None:
        """The node's JVM as last launched (None before its first start)."""
        return self.state.nodes.get(self.node(node).id)

    def _reap(self, node: int) -> None:
        popen = self._popen.get(f"n{node}")
        if popen is not None:
            popen.poll()

    # -- Partitionable ----------------------------------------------------------------

    def partition(self, grudge: Grudge, replication: Grudge | None = None) -> None:
        with self._lock:
            netns.run_per_node(netns.grudge_commands(self.layout, grudge, replication).values())

    def heal_network(self) -> None:
        with self._lock:
            netns.run_per_node([cmd] for cmd in netns.heal_commands(self.layout))

    # -- Degradable -----------------------------------------------------------------

    def drop_on_links(self, node: int, peers: Collection[int], probability: float) -> None:
        self._degrade(links.loss_commands(self.layout, node, peers, probability))

    def limit_links(self, node: int, peers: Collection[int], rate_kbit: int) -> None:
        self._degrade(links.rate_commands(self.layout, node, peers, rate_kbit))

    def _degrade(self, plan: Mapping[int, list[list[str]]]) -> None:
        with self._lock:
            entered = {node: self._enter(node) for node in plan}
            down = sorted(node for node, enter in entered.items() if enter is None)
            if down:
                raise ClusterError(f"node(s) {down} have no network namespace now (not running)")
            netns.run_per_node([[*(entered[node] or []), *cmd] for cmd in cmds]
                               for node, cmds in plan.items())

    def restore_links(self) -> dict[int, dict[str, int]]:
        found: dict[int, dict[str, int]] = {}
        errors: list[str] = []
        with self._lock:
            for node in self.node_ids:
                enter = self._enter(node)
                if enter is None:  # its namespace went with its rules
                    continue
                try:
                    chain, shaped = (netns.run([*enter, *cmd]) for cmd in links.counters_commands())
                    counters = links.parse_counters(chain, shaped)
                    for cmd in links.restore_commands(shaped=bool(shaped.strip())):
                        netns.run([*enter, *cmd])
                except ClusterError as e:  # every node gets its restore
                    errors.append(f"node {node}: {e}")
                    continue
                if counters is not None:
                    found[node] = counters
        if errors:
            raise ClusterError(f"could not restore the links of {'; '.join(errors)}")
        return found

    def _enter(self, node: int) -> list[str] | None:
        """The command prefix that runs a command in ``node``'s network namespace; None when
        it has none now."""
        return ["ip", "netns", "exec", self.layout.namespace(self.node(node).id)]

    # -- Skewable -------------------------------------------------------------------

    def _clock_env(self, node: int) -> dict[str, str]:
        """The environment that starts ``node``'s JVM on libfaketime when the spec has clock
        faults (its offset file made, true, if it has none yet); nothing otherwise."""
        if not self._spec.nemesis.skews_clocks:
            return {}
        lib = self._faketime()
        path = clocks.offset_file(self.state.dir, node)
        if not path.exists():
            clocks.write_offset(path, 0)
        return clocks.environment(lib, path)

    def _faketime(self) -> Path:
        """Where a broker JVM finds libfaketime: the host's."""
        return clocks.required_library()

    def set_clock(self, node: int, offset_s: int) -> None:
        if not self._spec.nemesis.skews_clocks:
            raise ClusterError("the brokers run on the true clock: a spec without clock faults "
                               "starts them without libfaketime")
        self.node(node)  # KeyError for a node this cluster does not have
        clocks.write_offset(clocks.offset_file(self.state.dir, node), offset_s)

    def reset_clocks(self) -> None:
        if not self._spec.nemesis.skews_clocks:
            return
        for node in self.node_ids:
            clocks.write_offset(clocks.offset_file(self.state.dir, node), 0)

    def read_clocks(self, nodes: Collection[int], timeout: float) -> dict[int, float | None]:
        partitions = {n: self.node_ids.index(n) for n in nodes}  # the health topic's layout
        return kafka_client.clock_offsets(self.bootstrap_servers(), partitions, timeout)

    # -- Toxifiable -----------------------------------------------------------------

    def add_toxic(
        self,
        node: int,
        kind: str,
        attributes: Mapping[str, int | float],
        stream: str = "downstream",
        toxicity: float = 1.0,
    ) -> str:
        with self._lock:
            self._toxic_seq += 1
            name = f"{kind}_{stream}_{self._toxic_seq}"
        self.toxiproxy.add_toxic(
            f"n{self.node(node).id}", kind, attributes, stream=stream, toxicity=toxicity, name=name
        )
        return name

    def remove_toxic(self, node: int, name: str) -> None:
        self.toxiproxy.remove_toxic(f"n{self.node(node).id}", name)

    def clear_toxics(self) -> None:
        errors: list[str] = []
        try:
            self._in_namespaces(self.node_ids, ends.release_commands())
        except ClusterError as e:
            errors.append(str(e))
        try:
            self.toxiproxy.reset()
        except ClusterError as e:
            errors.append(str(e))
        if errors:
            raise ClusterError("; ".join(errors))

    def hold_ends(self, nodes: Collection[int], window_s: float, hold_s: float) -> dict[int, dict[str, int]]:
        start = time.monotonic()
        with self._lock:
            self._end_holds += 1
            mark = self._end_holds
            down = sorted(node for node in nodes if self._enter(node) is None)
        if down:
            raise ClusterError(f"node(s) {down} have no network namespace now (not running)")
        try:
            self._in_namespaces(nodes, ends.hold_commands(mark))
            time.sleep(max(0.0, start + window_s - time.monotonic()))
            self._in_namespaces(nodes, ends.stop_marking_commands())
            time.sleep(max(0.0, start + hold_s - time.monotonic()))
            read = self._in_namespaces(nodes, ends.counters_commands())
        finally:
            self._in_namespaces(nodes, ends.release_commands())
        return {node: ends.parse_counters(out) for node, out in read.items()}

    def _in_namespaces(self, nodes: Collection[int], commands: list[list[str]]) -> dict[int, str]:
        """Run ``commands`` in order in the network namespace of each of ``nodes`` that has
        one now (a node without has no rules either), entered afresh; their outputs joined,
        by node (:func:`~faultline.cluster.host.netns.run_per_node`: every node's run, even
        when another's fail)."""
        with self._lock:
            entered = {node: enter for node in nodes if (enter := self._enter(node)) is not None}
            outs = netns.run_per_node([[*enter, *cmd] for cmd in commands] for enter in entered.values())
        return dict(zip(entered, outs, strict=True))

    # -- Wipeable -------------------------------------------------------------------

    def data_dir(self, node: int) -> Path:
        return self.node(node).data_dir

    def wipe(self, node: int) -> None:
        n = self.node(node)
        if n.is_alive():
            raise ClusterError(f"node {node} is running; kill or stop it before wiping")
        # The formatted storage stays (meta.properties, bootstrap.checkpoint): without it the
        # broker refuses to start. Partition logs and the offset checkpoints go; what cannot
        # is an error (the node would keep data its wipe is journaled as having destroyed),
        # raised once everything else has gone.
        n.data_dir.mkdir(parents=True, exist_ok=True)
        failed: list[str] = []
        for p in n.data_dir.iterdir():
            if p.name in ("meta.properties", "bootstrap.checkpoint"):
                continue
            try:
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink(missing_ok=True)
            except OSError as e:
                failed.append(f"{p.name}: {e}")
        if failed:
            raise ClusterError(f"node {node}'s wipe could not delete {'; '.join(failed)}")

    # -- files ----------------------------------------------------------------------

    def collect(self, dest: Path) -> None:
        dest = Path(dest)
        for node in self.nodes:
            target = dest / str(node.id)
            target.mkdir(parents=True, exist_ok=True)
            if node.config_file.exists():
                shutil.copy2(node.config_file, target / node.config_file.name)
            for f in node.log_files:
                shutil.copy2(f, target / f.name)
        proxy_log = self.state.dir / "toxiproxy.log"
        if proxy_log.exists():
            shutil.copy2(proxy_log, dest / "toxiproxy.log")

    def describe(self) -> dict[str, Any]:
        """A plain summary for ``faultline cluster status``: run, nodes, proxies, topics."""
        state = self.state
        nodes = [
            {"id": n.id, "pid": n.pid, "alive": n.is_alive(), "paused": n.paused,
             "address": n.address, "namespace": n.namespace, "proxy": n.proxy}
            for n in self.nodes
        ]  # fmt: skip
        return {
            "run_id": state.run_id, "detached": state.detached, "subnet": state.subnet,
            "bridge": self.layout.bridge_namespace, "workdir": state.workdir,
            "toxiproxy": f"127.0.0.1:{state.toxiproxy_port} in {self._toxiproxy_netns()}",
            "bootstrap_servers": self.bootstrap_servers(), "nodes": nodes,
            "kafka_version": self._spec.kafka.version, "stale": state.is_stale(),
        }  # fmt: skip

    def topics(self) -> list[str]:
        return self.admin().call(kafka_client.topic_names, 5.0)


def _fmt_leaders(state: Mapping[int, PartitionState]) -> str:
    return ", ".join(f"p{p}: leader {s.leader} isr {list(s.isr)}" for p, s in sorted(state.items())) or "none"


__all__ = ["LocalCluster", "LocalNode"]
