"""The Nemesis protocol, and the shared machinery of faults aimed at whole nodes.

A nemesis owns one fault family. The package (:mod:`faultline.nemeses.package`)
drives it in three steps per scheduled fault:

1. ``plan(step, busy)`` reads live state (leaders, the active controller) and
   chooses targets; its result is the ``value`` of the journaled invoke op
   (``nodes``, ``grudge``, ``leaders`` ...);
2. ``invoke(op)`` applies the fault (``op.f`` is the family's fault action, e.g.
   ``kill``) or heals it (the heal action, e.g. ``start``); it returns the op with
   the completion value (what was done, and an ``error`` if it failed on some node),
   which the package journals;
3. ``teardown()`` undoes whatever this nemesis may still have in effect. It must
   heal even when a graceful heal failed or was never attempted, must not raise
   for something already healed, and may be called more than once.

Every nemesis op is ``type: "info"`` with ``process: "nemesis"`` (docs/history.md).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

from confluent_kafka import KafkaException

from faultline.cluster import kafka_client
from faultline.cluster.protocol import (
    Cluster,
    Degradable,
    Killable,
    Partitionable,
    Pausable,
    Skewable,
    Stoppable,
    Toxifiable,
    Wipeable,
)
from faultline.errors import NemesisError
from faultline.faults import FAMILIES
from faultline.history import Op
from faultline.nemeses.schedule import ScheduledFault
from faultline.targeted import OFFSETS_TOPIC, TRANSACTIONS_TOPIC, PartitionLike, coordinator_partition

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How long ``plan`` waits for live state a fault needs (a partition's leader, the controller).
LIVE_STATE_TIMEOUT_S = 10.0
#: How long ``plan`` waits for the courtesy leader snapshot before going without it.
SNAPSHOT_TIMEOUT_S = 3.0


@runtime_checkable
class Nemesis(Protocol):
    """One fault family; see the module docstring for the contract of each method."""

    family: str

    def setup(self, cluster: Cluster) -> None:
        """Bind to ``cluster``; raises NemesisError if the cluster lacks a capability."""
        ...

    def plan(self, step: ScheduledFault, busy: Collection[int]) -> dict[str, Any]:
        """Choose targets for ``step`` from live state; ``busy`` nodes are already faulted
        by a node-level fault and must not be chosen. Raises NemesisError when there is
        no target (e.g. every node busy, no active controller)."""
        ...

    def invoke(self, op: Op) -> Op:
        """Apply (``op.f`` is the fault action) or heal (the heal action) what ``op.value``
        names; returns ``op`` with the completion value. Raises NemesisError on failure,
        or returns the completion with an ``error`` (a fault that failed on some of the
        nodes it names); either way the fault counts as possibly applied."""
        ...

    def teardown(self) -> None:
        """Heal everything this nemesis may have in effect; idempotent, never skipped."""
        ...


def _missing(cluster: Cluster, family: str, what: str) -> NemesisError:
    return NemesisError(f"the {type(cluster).__name__} backend cannot {what}, "
                        f"which the {family!r} nemesis needs")


def killable(cluster: Cluster, family: str) -> Killable:
    """``cluster`` as :class:`Killable`, or NemesisError naming ``family``."""
    if isinstance(cluster, Killable):
        return cluster
    raise _missing(cluster, family, "kill and start nodes")


def pausable(cluster: Cluster, family: str) -> Pausable:
    """``cluster`` as :class:`Pausable`, or NemesisError naming ``family``."""
    if isinstance(cluster, Pausable):
        return cluster
    raise _missing(cluster, family, "pause and resume nodes")


def stoppable(cluster: Cluster, family: str) -> Stoppable:
    """``cluster`` as :class:`Stoppable`, or NemesisError naming ``family``."""
    if isinstance(cluster, Stoppable):
        return cluster
    raise _missing(cluster, family, "stop nodes gracefully")


def partitionable(cluster: Cluster, family: str) -> Partitionable:
    """``cluster`` as :class:`Partitionable`, or NemesisError naming ``family``."""
    if isinstance(cluster, Partitionable):
        return cluster
    raise _missing(cluster, family, "partition the network")


def degradable(cluster: Cluster, family: str) -> Degradable:
    """``cluster`` as :class:`Degradable`, or NemesisError naming ``family``."""
    if isinstance(cluster, Degradable):
        return cluster
    raise _missing(cluster, family, "degrade the links between brokers")


def skewable(cluster: Cluster, family: str) -> Skewable:
    """``cluster`` as :class:`Skewable`, or NemesisError naming ``family``."""
    if isinstance(cluster, Skewable):
        return cluster
    raise _missing(cluster, family, "set brokers' clocks apart")


def toxifiable(cluster: Cluster, family: str) -> Toxifiable:
    """``cluster`` as :class:`Toxifiable`, or NemesisError naming ``family``."""
    if isinstance(cluster, Toxifiable):
        return cluster
    raise _missing(cluster, family, "add toxics to client links")


def wipeable(cluster: Cluster, family: str) -> Wipeable:
    """``cluster`` as :class:`Wipeable`, or NemesisError naming ``family``."""
    if isinstance(cluster, Wipeable):
        return cluster
    raise _missing(cluster, family, "delete a node's data")


#: Capability name (a family's ``needs``) -> the check that casts a cluster to it.
CAPABILITIES: Mapping[str, Callable[[Cluster, str], object]] = {
    "Killable": killable, "Pausable": pausable, "Stoppable": stoppable,
    "Partitionable": partitionable, "Toxifiable": toxifiable, "Wipeable": wipeable,
    "Degradable": degradable, "Skewable": skewable,
}


def check_capabilities(cluster: Cluster, family: str) -> None:
    """NemesisError naming ``family`` unless ``cluster`` has every capability it needs
    (:attr:`faultline.faults.Family.needs`)."""
    for need in FAMILIES[family].needs:
        CAPABILITIES[need](cluster, family)


def with_timeout(fn: Callable[[], T], timeout: float, what: str) -> T:
    """Call ``fn`` until it answers, for at most ``timeout`` seconds.

    Live-state reads go through the client proxies, where a toxic can hold a request
    indefinitely, and any broker may answer with metadata it has not caught up on yet
    (``UNKNOWN_TOPIC_OR_PART``); the schedule must neither stall nor give up on the
    first such answer. ``fn`` runs in a daemon thread and is retried on error every
    0.2 s. Raises NemesisError with the last error when the time is up.
    """
    box: list[T] = []
    err: list[BaseException] = []
    deadline = time.monotonic() + timeout

    def target() -> None:
        while True:
            try:
                box.append(fn())
                return
            except Exception as e:  # retried, then handed to the caller below
                err[:] = [e]
            if time.monotonic() + 0.2 >= deadline:
                return
            time.sleep(0.2)

    t = threading.Thread(target=target, name=f"nemesis-{what}", daemon=True)
    t.start()
    t.join(timeout)
    if box:
        return box[0]
    if err:
        raise NemesisError(f"{what} failed: {err[0]}") from err[0]
    raise NemesisError(f"{what} did not answer within {timeout:.0f} s")


def leaders_snapshot(cluster: Cluster, timeout: float = SNAPSHOT_TIMEOUT_S) -> dict[str, int]:
    """``{"<topic>/<partition>": leader}`` for the test topic now, leaderless partitions
    left out; empty when the cluster does not answer in time (it is a courtesy for the
    checker, never a reason to skip a fault)."""
    topic = cluster.spec.topic.name
    try:
        states = with_timeout(lambda: cluster.leaders(topic), timeout, "leaders")
    except NemesisError as e:
        log.info("no leader snapshot for the nemesis op: %s", e)
        return {}
    return leaders_json(topic, states)


def leaders_json(topic: str, states: Mapping[int, PartitionLike]) -> dict[str, int]:
    """``{"<topic>/<partition>": leader}`` of ``states``, leaderless partitions left out:
    the ``leaders`` of a nemesis op."""
    return {f"{topic}/{p}": s.leader for p, s in sorted(states.items()) if s.leader is not None}


def coordinator(cluster: Cluster, topic: str, key: str, timeout: float) -> int | None:
    """The broker coordinating ``key``: the leader of its partition of ``topic``, the offsets
    topic for a group or the transaction state topic for a transactional id
    (:func:`~faultline.targeted.coordinator_partition`), None when it has none, as one
    broker's Metadata answer says; NemesisError when none answers within ``timeout``."""
    try:
        with kafka_client.new_admin(cluster.bootstrap_servers(), timeout) as admin:
            states = kafka_client.metadata_states(admin, topic, timeout)
    except (KafkaException, LookupError) as e:
        raise NemesisError(f"no metadata for {topic}: {e}") from None
    return states[coordinator_partition(key, len(states))].leader


#: The workloads whose random schedules aim faults at a coordinator (:func:`run_coordinator`).
COORDINATED_WORKLOADS = frozenset({"group", "txn"})


def run_coordinator(cluster: Cluster, pick: int, busy: Collection[int] = ()) -> tuple[int, dict[str, str]]:
    """The broker coordinating the run's group (``spec.group_id``) now, or in a txn
    workload's run that of producer ``pick % producers``'s transactional id, read as
    :func:`with_timeout` reads live state; with the op field naming whose (``group`` or
    ``transactional_id``). NemesisError when there is none, or it is ``busy`` (faulted already)."""
    spec = cluster.spec
    topic, field, key = ((TRANSACTIONS_TOPIC, "transactional_id",
                          spec.transactional_id(pick % spec.workload.producers))
                         if spec.workload.name == "txn" else (OFFSETS_TOPIC, "group", spec.group_id))
    whose = f"{field.replace('_', ' ')} {key}"
    node = with_timeout(lambda: coordinator(cluster, topic, key, SNAPSHOT_TIMEOUT_S), LIVE_STATE_TIMEOUT_S,
                        f"{whose}'s coordinator")
    if node is None:
        raise NemesisError(f"{whose}'s partition of {topic} has no leader")
    if node in busy:
        raise NemesisError(f"{whose}'s coordinator, node {node}, is faulted already")
    return node, {field: key}


def choose(candidates: Collection[int], pick: int) -> int:
    """A reproducible choice among ``candidates`` (sorted first, so order does not matter)."""
    if not candidates:
        raise NemesisError("no candidate node to choose from")
    ordered = sorted(candidates)
    return ordered[pick % len(ordered)]


def error_text(e: BaseException) -> str:
    """An exception as one line for the journal: its type and the first line of its text."""
    return f"{type(e).__name__}: {e}".splitlines()[0]


def completed(op: Op, **extra: Any) -> Op:
    """``op`` with ``extra`` merged into its value: the completion of a nemesis op."""
    value = dict(op.value or {})
    value.update(extra)
    return dataclasses.replace(op, value=value)


class Bound:
    """What every nemesis keeps: its ``family`` and the cluster :meth:`setup` bound it to."""

    family: str = ""

    def __init__(self) -> None:
        self._cluster: Cluster | None = None

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            raise NemesisError(f"the {self.family!r} nemesis was used before setup()")
        return self._cluster

    def setup(self, cluster: Cluster) -> None:
        check_capabilities(cluster, self.family)
        self._cluster = cluster


class NodeFault(Bound):
    """A fault that takes one node out (kill, pause, stop, wipe, lose-unflushed).

    Subclasses set ``family`` and implement ``_fault``; ``_heal``
    starts the node unless a subclass heals otherwise.
    The target is drawn with ``step.pick`` from the nodes not ``busy``; nodes are
    remembered *before* the fault is applied, so ``teardown`` heals a fault that failed
    half-way as well as one whose graceful heal failed.

    Its ``coordinator_kind`` aims it at the broker coordinating the run's group (or a
    transactional id of the txn workload's) instead
    (:func:`run_coordinator`). A node the fault cannot touch gets nothing done, and its
    completion does not name it:
    one this nemesis holds faulted already, or (``needs_running``) one that is down (a
    second ``crash`` by hand, a kill after a failed start). The checker credits a fault
    only to the nodes its completion names, and none when it says ``skipped``. A node
    found running is held by no fault that leaves it down (``leaves_down``).
    """

    #: Whether the fault does something only to a running node (a kill, a pause, a stop);
    #: one that destroys data (wipe, lose-unflushed) does it to a node that is down too.
    needs_running = True
    #: Whether the fault leaves the node down until its heal (all but a pause): such a node
    #: found running was started since, or the fault failed before it went down, so it is
    #: under this fault no more.
    leaves_down = True

    def __init__(self) -> None:
        super().__init__()
        self._faulted: set[int] = set()
        self._lock = threading.Lock()

    def plan(self, step: ScheduledFault, busy: Collection[int]) -> dict[str, Any]:
        if step.kind == FAMILIES[self.family].coordinator_kind:
            node, whose = run_coordinator(self.cluster, step.pick, busy)
            return {"nodes": [node], "leaders": leaders_snapshot(self.cluster), **whose}
        free = [n.id for n in self.cluster.nodes if n.id not in busy]
        if not free:
            raise NemesisError(f"no node left to {self.family}: all of {sorted(busy)} are faulted")
        node = choose(free, step.pick)
        return {"nodes": [node], "leaders": leaders_snapshot(self.cluster)}

    def invoke(self, op: Op) -> Op:
        """Every node of ``op`` gets its fault (or heal), even when another node's fails.
        A fault that failed on some node returns its completion with an ``error`` naming
        each failure, and those nodes (possibly faulted) among its ``nodes``; a heal that
        failed raises NemesisError naming each, once every node has had its heal."""
        nodes = [int(n) for n in (op.value or {}).get("nodes", [])]
        failed: list[str] = []
        if op.f in {a.fault for a in FAMILIES[self.family].all_actions}:
            results: list[str] = []
            extra: dict[str, Any] = {}
            done: list[int] = []  # and possibly done: those whose fault failed
            for node in nodes:
                alive = self.cluster.node(node).is_alive()
                with self._lock:
                    if self.leaves_down and alive:
                        self._faulted.discard(node)
                    why = (f"node {node} was under this {self.family} already" if node in self._faulted
                           else f"node {node} was down" if self.needs_running and not alive else None)
                    if why is None:
                        self._faulted.add(node)
                if why is not None:
                    results.append(why + ": nothing done")
                    continue
                done.append(node)
                try:
                    fields = self._fault(node)
                except Exception as e:  # possibly applied; the nodes after it still get theirs
                    failed.append(f"node {node}: {error_text(e)}")
                    results.append(f"node {node} failed")
                    continue
                results.append(fields.pop("result"))
                for k, v in fields.items():  # lists (the nodes a stop had to kill) add up
                    extra[k] = [*extra[k], *v] if isinstance(v, list) and k in extra else v
            result = "; ".join(r for r in results if r)
            if nodes and not done:
                return completed(op, nodes=[], result="skipped", why=result)
            done_op = completed(op, result=result, nodes=done, **extra)
            if failed:
                return dataclasses.replace(done_op, error=f"{op.f} failed on {'; '.join(failed)}")
            return done_op
        if op.f in {a.heal for a in FAMILIES[self.family].all_actions}:
            for node in nodes:
                try:
                    self._heal(node)
                except Exception as e:  # the nodes after it are healed all the same
                    failed.append(f"node {node}: {error_text(e)}")
                    continue
                with self._lock:
                    self._faulted.discard(node)
            if failed:
                raise NemesisError(f"{op.f} failed on {'; '.join(failed)}")
            return completed(op, result="started" if op.f == "start" else op.f + "d")
        raise NemesisError(f"the {self.family!r} nemesis cannot {op.f!r}")

    def teardown(self) -> None:
        if self._cluster is None:
            return
        with self._lock:
            nodes = sorted(self._faulted)
        errors = []
        for node in nodes:
            try:
                self._heal(node)
                with self._lock:
                    self._faulted.discard(node)
            except Exception as e:  # try every node, report all
                errors.append(f"node {node}: {e}")
        if errors:
            raise NemesisError(f"{self.family} teardown could not heal {'; '.join(errors)}")

    def forget(self, nodes: Collection[int]) -> None:
        """Stop counting ``nodes`` as under this fault: another fault ended it there (a
        kill, a stop or a wipe ends a pause), so there is nothing left to heal, and the
        node may take this fault again."""
        with self._lock:
            self._faulted.difference_update(nodes)

    @property
    def faulted(self) -> frozenset[int]:
        """Nodes this nemesis may still have faulted (for tests and leftovers checks)."""
        with self._lock:
            return frozenset(self._faulted)

    def _fault(self, node: int) -> dict[str, Any]:
        """Apply the fault to ``node``; returns the completion fields: ``result`` (a short
        description) and any others the family journals."""
        raise NotImplementedError

    def _heal(self, node: int) -> None:
        """Undo the fault on ``node`` (by default: start it); must be a no-op when it is
        already undone."""
        killable(self.cluster, self.family).start_node(node)
