"""Grudges: who drops whose traffic during a network partition. Pure.

A grudge maps each node id to the set of node ids it drops traffic *from*
(docs/history.md); nodes with nothing to drop are left out. Builders that need to choose
take ``pick``, a seeded integer, so a schedule's choice is reproducible; they look
only at the node ids they are given, which the caller reads from live state
(the current leader, the active controller) at invoke time.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from faultline.errors import NemesisError
from faultline.history import Op
from faultline.nemeses.base import (
    LIVE_STATE_TIMEOUT_S,
    Bound,
    choose,
    completed,
    leaders_json,
    leaders_snapshot,
    partitionable,
    run_coordinator,
    with_timeout,
)
from faultline.nemeses.schedule import ScheduledFault

Grudge = dict[int, frozenset[int]]

__all__ = [
    "Grudge", "PartitionNemesis", "bridge", "complete", "halves", "isolate", "nodes_of",
    "ring", "to_json",
]


def complete(components: Iterable[Collection[int]]) -> Grudge:
    """Each node drops every node outside its own component (a clean split)."""
    comps = [frozenset(c) for c in components]
    everyone = frozenset().union(*comps) if comps else frozenset()
    grudge: Grudge = {}
    for comp in comps:
        for node in comp:
            others = everyone - comp
            if others:
                grudge[node] = others
    return grudge


def isolate(nodes: Collection[int], target: int) -> Grudge:
    """``target`` alone on one side, every other node on the other."""
    if target not in nodes:
        raise NemesisError(f"cannot isolate node {target}: not one of {sorted(nodes)}")
    return complete([[target], [n for n in nodes if n != target]])


def halves(nodes: Collection[int], pick: int) -> Grudge:
    """A random minority (``len // 2`` nodes) cut from the majority."""
    order = _shuffled(nodes, pick)
    k = len(order) // 2
    if k == 0:
        raise NemesisError("halves needs at least 2 nodes")
    return complete([order[:k], order[k:]])


def bridge(nodes: Collection[int], pick: int) -> Grudge:
    """Two halves that cannot see each other, and one node that sees both.

    As Jepsen's: the nodes are split into halves of ``len // 2`` and the rest; the
    first node of the second half keeps full connectivity to both.
    """
    order = _shuffled(nodes, pick)
    if len(order) < 3:
        raise NemesisError("bridge needs at least 3 nodes")
    k = len(order) // 2
    middle = order[k]
    grudge = complete([order[:k], order[k:]])
    grudge.pop(middle, None)
    return {n: d - {middle} for n, d in grudge.items() if d - {middle}}


def ring(nodes: Collection[int], pick: int) -> Grudge:
    """Nodes on a random ring, each talking only to its two neighbours.

    On five nodes every node sees a majority (itself and two neighbours), but no two
    nodes see the same majority. Needs at least four nodes: on three, everyone is
    everyone's neighbour.
    """
    order = _shuffled(nodes, pick)
    n = len(order)
    if n < 4:
        raise NemesisError("ring needs at least 4 nodes")
    grudge: Grudge = {}
    for i, node in enumerate(order):
        keep = {order[(i - 1) % n], order[(i + 1) % n], node}
        grudge[node] = frozenset(order) - keep
    return grudge


def to_json(grudge: Mapping[int, Collection[int]]) -> dict[str, list[int]]:
    """The history form: string keys, sorted lists (``{"1": [2, 3], ...}``)."""
    return {str(k): sorted(v) for k, v in sorted(grudge.items())}


def _from_json(raw: Mapping[str, Collection[int]]) -> Grudge:
    return {int(k): frozenset(int(d) for d in v) for k, v in raw.items()}


def nodes_of(grudge: Mapping[int, Collection[int]]) -> list[int]:
    """Every node the grudge touches (dropping or dropped), sorted."""
    seen: set[int] = set(grudge)
    for dropped in grudge.values():
        seen.update(dropped)
    return sorted(seen)


def _shuffled(nodes: Collection[int], pick: int) -> list[int]:
    order = sorted(nodes)
    random.Random(pick).shuffle(order)
    return order


class PartitionNemesis(Bound):
    """``partition`` applies a grudge drawn at invoke time; ``heal`` removes every rule.

    Kinds (``step.kind``): ``isolate-node`` (a node drawn with ``pick``),
    ``isolate-leader`` (the current leader of test-topic partition
    ``pick % partitions``), ``isolate-controller`` (the active KRaft controller),
    ``isolate-coordinator`` (the broker coordinating the run's group, or a transactional
    id's in a txn workload's run: :func:`~faultline.nemeses.base.run_coordinator`),
    ``halves``, ``bridge``, ``ring``. The invoke value carries the ``grudge`` in the
    history form, the ``nodes`` it touches, the ``leaders`` at invoke time, and for
    targeted kinds ``target`` (and ``partition``). Only the brokers' own links are cut;
    client traffic through the proxies is not.
    """

    family = "partition"

    def plan(self, step: ScheduledFault, busy: Collection[int]) -> dict[str, Any]:
        cluster = self.cluster
        nodes = [n.id for n in cluster.nodes]
        # isolate-leader's snapshot is the very read its target comes from (below): a
        # second read may see leadership moved, and journal another leader than it cut off
        leaders = {} if step.kind == "isolate-leader" else leaders_snapshot(cluster)
        extra: dict[str, Any] = {}
        if step.kind == "isolate-node":
            target = choose(nodes, step.pick)
            grudge = isolate(nodes, target)
            extra = {"target": target}
        elif step.kind == "isolate-leader":
            topic = cluster.spec.topic.name
            partition = step.pick % cluster.spec.topic.partitions
            states = with_timeout(lambda: cluster.leaders(topic), LIVE_STATE_TIMEOUT_S, "leaders")
            state = states.get(partition)
            if state is None or state.leader is None:
                raise NemesisError(f"partition {topic}/{partition} has no leader to isolate")
            grudge = isolate(nodes, state.leader)
            leaders = leaders_json(topic, states)
            extra = {"target": state.leader, "partition": f"{topic}/{partition}"}
        elif step.kind == "isolate-controller":
            controller = with_timeout(cluster.active_controller, LIVE_STATE_TIMEOUT_S, "active controller")
            if controller is None:
                raise NemesisError("there is no active controller to isolate")
            grudge = isolate(nodes, controller)
            extra = {"target": controller}
        elif step.kind == "isolate-coordinator":
            target, whose = run_coordinator(cluster, step.pick)
            grudge = isolate(nodes, target)
            extra = {"target": target, **whose}
        elif step.kind == "halves":
            grudge = halves(nodes, step.pick)
        elif step.kind == "bridge":
            grudge = bridge(nodes, step.pick)
        elif step.kind == "ring":
            grudge = ring(nodes, step.pick)
        else:
            raise NemesisError(f"unknown partition kind {step.kind!r}")
        return {"kind": step.kind, "grudge": to_json(grudge), "nodes": nodes_of(grudge),
                "leaders": leaders, **extra}

    def invoke(self, op: Op) -> Op:
        """``partition``: make the network exactly the value's ``grudge`` and
        ``replication`` grudge (inter-broker traffic only; either may be absent: empty).
        ``heal``: remove every rule, or, when the value carries a ``grudge`` or a
        ``replication`` grudge (what stays in effect after a partial heal), make the
        network exactly that."""
        net = partitionable(self.cluster, self.family)
        value = op.value or {}
        grudge, replication = _from_json(value.get("grudge", {})), _from_json(value.get("replication", {}))
        if op.f == "partition":
            net.partition(grudge, replication or None)
            cut = sum(len(v) for v in grudge.values())
            held = sum(len(v) for v in replication.values())
            return completed(op, result=f"cut {cut} directed links" + (
                f" and the replication of {held}" if held else ""))
        if op.f == "heal":
            if grudge or replication:
                net.partition(grudge, replication or None)
                return completed(op, result="network partly healed")
            net.heal_network()
            return completed(op, result="network healed")
        raise NemesisError(f"the 'partition' nemesis cannot {op.f!r}")

    def teardown(self) -> None:
        """Remove every partition rule, whether or not a grudge is known to be applied."""
        if self._cluster is None:
            return
        partitionable(self._cluster, self.family).heal_network()
