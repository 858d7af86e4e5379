"""What every cluster backend offers: a small ``Cluster`` protocol plus optional capabilities.

A nemesis asks for what it needs with ``isinstance``::

    if isinstance(cluster, Killable):
        cluster.kill(node_id)

Nodes are named by their Kafka ``node.id`` (1, 2, 3, ...) everywhere: in capability
calls, in grudges and in :meth:`Cluster.leaders`. The local backend
(:class:`faultline.cluster.local.cluster.LocalCluster`) implements every capability.

Contracts shared by all backends:

- ``start()`` returns only once the cluster is *ready*: every broker registered and
  unfenced, and a produce/consume round trip through the client path (the proxies)
  worked. ``stop()`` removes everything the cluster created and never raises for
  something already gone; both are idempotent. A cluster is a context manager that
  starts on enter and always stops on exit.
- Client traffic (``bootstrap_servers()``) goes through Toxiproxy, never straight to
  a broker, so a toxic affects every client including the harness's own admin calls.
- Capability calls take node ids; a fault applied to a node that is already in that
  state (kill a dead node, resume a running one) is a no-op, not an error.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import NamedTuple, Protocol, Self, runtime_checkable

from faultline.spec import TestSpec, TopicSpec

#: A grudge: node id -> the node ids whose traffic it drops (Jepsen's term).
#: ``{1: {2, 3}, 2: {1}, 3: {1}}`` isolates node 1 in both directions.
Grudge = Mapping[int, Collection[int]]


class PartitionState(NamedTuple):
    """One partition as the controller reports it; ``leader`` is None while leaderless."""

    leader: int | None
    isr: tuple[int, ...]
    replicas: tuple[int, ...] = ()

    @property
    def full(self) -> bool:
        """Led, and every assigned replica in the ISR (False when replicas are unknown)."""
        return self.leader is not None and bool(self.replicas) and set(self.isr) == set(self.replicas)


@runtime_checkable
class Node(Protocol):
    """One Kafka process (broker and controller) and the files it owns."""

    @property
    def id(self) -> int:
        """The Kafka ``node.id``."""
        ...

    @property
    def address(self) -> str:
        """The node's own IP address, as other nodes reach it."""
        ...

    @property
    def data_dir(self) -> Path:
        """The partition log directory (``log.dirs``)."""
        ...

    @property
    def log_dir(self) -> Path:
        """Where the broker writes ``server.log`` and friends."""
        ...

    def is_alive(self) -> bool:
        """True while the process exists (a paused process is alive)."""
        ...


@runtime_checkable
class Cluster(Protocol):
    """A running Kafka cluster that a test drives; see the module docstring for contracts."""

    @property
    def spec(self) -> TestSpec: ...

    @property
    def nodes(self) -> Sequence[Node]: ...

    def node(self, node_id: int) -> Node:
        """The node with this id; KeyError if there is none."""
        ...

    def bootstrap_servers(self) -> str:
        """``host:port,...`` for clients; every address is a proxy, one per node, in the
        order of :attr:`nodes`."""
        ...

    def start(self) -> None:
        """Bring the cluster up and return once it is ready (or raise ClusterError)."""
        ...

    def stop(self) -> None:
        """Tear everything down; idempotent, never leaves a process or a link behind."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Wait until every broker is registered and unfenced and a round trip works."""
        ...

    def create_topic(self, topic: TopicSpec | None = None, timeout: float = 60.0) -> None:
        """Create ``topic`` (default: ``spec.topic``) and wait until every partition has a
        leader and a full ISR. Creating a topic that exists with the same layout is a no-op."""
        ...

    def wait_full_isr(self, topic: str, timeout: float = 60.0) -> None:
        """Wait until every partition of ``topic`` has a leader and all replicas in its ISR."""
        ...

    def leaders(self, topic: str) -> dict[int, PartitionState]:
        """partition -> (leader, isr), as the cluster reports it now."""
        ...

    def active_controller(self) -> int | None:
        """The node id of the active KRaft controller, or None if there is none known."""
        ...

    def collect(self, dest: Path) -> None:
        """Copy each node's configs and logs to ``dest/<node-id>/`` (docs/history.md ``nodes/``)."""
        ...


@runtime_checkable
class Killable(Protocol):
    """SIGKILL a node, and start it again with its data intact."""

    def kill(self, node: int) -> None:
        """SIGKILL the node's process and wait until it is gone."""
        ...

    def start_node(self, node: int) -> None:
        """Start a node that is down; returns once its process runs (not once it has
        rejoined: use ``wait_healthy``)."""
        ...


@runtime_checkable
class Stoppable(Protocol):
    """Graceful stop (SIGTERM: controlled shutdown moves leadership away first)."""

    def stop_node(self, node: int, timeout: float = 30.0) -> bool:
        """SIGTERM the node and wait for it to exit; SIGKILL after ``timeout`` seconds.
        True when it had to (the stop was then a kill: no clean shutdown). Start it again
        with ``Killable.start_node``."""
        ...


@runtime_checkable
class Pausable(Protocol):
    """SIGSTOP / SIGCONT: a process that is alive but does nothing."""

    def pause(self, node: int) -> None:
        """SIGSTOP the node's process; returns once it is stopped."""
        ...

    def resume(self, node: int) -> None:
        """SIGCONT it; returns once it runs again."""
        ...


@runtime_checkable
class Partitionable(Protocol):
    """Network partitions between nodes; client traffic (the proxies) is not affected."""

    def partition(self, grudge: Grudge, replication: Grudge | None = None) -> None:
        """Make the network exactly ``grudge``: node ``a`` drops every packet from each node
        in ``grudge[a]``; and ``replication``: node ``a`` drops only inter-broker traffic
        (the BROKER listener's port, either way) from each node in ``replication[a]``, so
        those nodes stay in the KRaft quorum and serve clients but do not replicate from
        each other. Replaces any earlier grudge and replication grudge."""
        ...

    def heal_network(self) -> None:
        """Drop every partition rule; idempotent."""
        ...


@runtime_checkable
class Degradable(Protocol):
    """Degraded links between brokers (loss, a bandwidth limit); client traffic is not
    affected. One node's links at a time: degrading a second before a restore may fail."""

    def drop_on_links(self, node: int, peers: Collection[int], probability: float) -> None:
        """Drop each packet between ``node`` and each of ``peers``, either way, with
        ``probability``."""
        ...

    def limit_links(self, node: int, peers: Collection[int], rate_kbit: int) -> None:
        """Limit the traffic between ``node`` and each of ``peers`` to ``rate_kbit`` kbit/s,
        each way."""
        ...

    def restore_links(self) -> dict[int, dict[str, int]]:
        """Remove every degradation; returns, per node that had one, what it did
        (``dropped`` packets, ``shaped_packets``, ``overlimits``). Idempotent."""
        ...


@runtime_checkable
class Skewable(Protocol):
    """Brokers' wall clocks set apart from the kernel's (libfaketime, :mod:`.host.clocks`);
    their monotonic clocks stay true. Only a cluster whose spec has clock faults can."""

    def set_clock(self, node: int, offset_s: int) -> None:
        """Set ``node``'s wall clock ``offset_s`` seconds from the true time (0 resets
        it); the broker follows within a second, without a restart."""
        ...

    def reset_clocks(self) -> None:
        """Set every node's clock true again. Idempotent."""
        ...

    def read_clocks(self, nodes: Collection[int], timeout: float) -> dict[int, float | None]:
        """How far each of ``nodes``' wall clocks is ahead of the true time, in seconds, as
        its broker shows it now (a record's log-append time; docs/design.md, its error);
        None for a node that did not answer within ``timeout``."""
        ...


@runtime_checkable
class Toxifiable(Protocol):
    """Toxiproxy toxics on the client link of a node, and held transaction ends on it
    (:mod:`.host.ends`)."""

    def add_toxic(
        self,
        node: int,
        kind: str,
        attributes: Mapping[str, int | float],
        stream: str = "downstream",
        toxicity: float = 1.0,
    ) -> str:
        """Add a toxic (``latency``, ``bandwidth``, ``timeout``, ``reset_peer``, ``slicer``,
        ``slow_close``, ``limit_data``) to the node's proxy; returns the toxic's name."""
        ...

    def remove_toxic(self, node: int, name: str) -> None: ...

    def clear_toxics(self) -> None:
        """Remove every toxic from every proxy, and let every held end go; idempotent."""
        ...

    def hold_ends(self, nodes: Collection[int], window_s: float, hold_s: float) -> dict[int, dict[str, int]]:
        """On each of ``nodes``, hold every client connection that carries a transaction's
        end (an EndTxn request) in the next ``window_s`` seconds until ``hold_s`` seconds
        from now, then let them go; blocks until then. Per node, the ``connections`` held
        and the packets ``dropped``."""
        ...


@runtime_checkable
class Wipeable(Protocol):
    """Access to a node's partition data on disk (wipe, lose-unflushed)."""

    def data_dir(self, node: int) -> Path:
        """The node's ``log.dirs``; only touch it while the node is down."""
        ...

    def wipe(self, node: int) -> None:
        """Delete every partition replica of a node that is down (its KRaft metadata stays,
        so it rejoins as the same node with empty logs). ClusterError if it is running, or
        if anything could not be deleted (the rest is deleted all the same)."""
        ...
