"""Fault families: one record each, from which everything else that knows a fault derives.

The spec's fault names (:data:`faultline.spec.FAULTS`), the schedule's kinds and the
actions it journals (:mod:`faultline.nemeses.schedule`), the package's busy-node rule
and the capabilities each nemesis checks (:mod:`faultline.nemeses`), the guarantees'
fault tokens (:mod:`faultline.checkers.guarantees`) and the reference model's steps
(:mod:`faultline.checkers.model.explore`) all read :data:`FAMILIES`.

Words, one meaning each:

- a *family* is what a spec names: ``kill``, ``partition``, ``toxics`` ...;
- a *kind* is one variant within a family (``isolate-leader`` for ``partition``,
  ``latency`` for ``toxics``); a family with one variant has one kind, its own name.
  The schedule draws a kind per fault and the nemesis journals it as ``kind`` (a
  consumer kind as the targeted verb's: ``crash``, ``pause``);
- an *action* is a nemesis op's ``f`` in the history: a kind's ``fault`` action
  applies it (``kill``, ``toxic``), its ``heal`` action undoes it (``start``,
  ``clear-toxics``). The kinds of a family share its two actions, unless it gives
  some kind its own (``pause-consumer`` of ``clients``: ``pause-client``,
  ``resume-client``); :meth:`Family.actions` says which.

Imports nothing of the project: every layer may use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

#: Partition kinds: grudge shapes (:mod:`faultline.nemeses.partition`).
PARTITION_KINDS: tuple[str, ...] = (
    "isolate-node", "isolate-leader", "isolate-controller", "halves", "bridge", "ring")
#: Toxiproxy toxics the ``toxics`` family draws from.
TOXIC_KINDS: tuple[str, ...] = ("latency", "bandwidth", "timeout", "reset_peer", "slicer")
#: Degradations of the links between brokers (:mod:`faultline.nemeses.links`); no latency:
#: the kernels this runs on may have no netem (``faultline doctor`` says).
LINK_KINDS: tuple[str, ...] = ("loss", "bandwidth")
#: Crashes of the clients under test (:mod:`faultline.nemeses.clients`): a producer killed mid-send.
CLIENT_KINDS: tuple[str, ...] = ("crash",)
#: Faults of a group workload's consumers (:mod:`faultline.nemeses.clients`), drawn in its
#: runs only: a consumer killed (restarted at the heal), a consumer paused (SIGSTOP,
#: SIGCONT at the heal).
CONSUMER_KINDS: tuple[str, ...] = ("crash-consumer", "pause-consumer")
#: Faults of a txn workload's producers beside their crash, drawn in its runs only: a
#: producer paused (SIGSTOP, SIGCONT at the heal), whose transaction may time out and be
#: aborted by its coordinator while it sleeps.
TXN_CLIENT_KINDS: tuple[str, ...] = ("pause-producer",)
#: A broker's wall clock set off and held, or jumping back and forth
#: (:mod:`faultline.nemeses.clock`).
CLOCK_KINDS: tuple[str, ...] = ("bump", "strobe")


class Actions(NamedTuple):
    """A kind's two actions: ``fault`` applies it, ``heal`` undoes it."""

    fault: str
    heal: str


@dataclass(frozen=True, slots=True)
class Family:
    """One fault family.

    ``takes_node_out``: a fault takes a whole node out (its process or its disk), so two
    such faults never pick the same node. ``on_nodes``: it acts on nodes rather than on
    client links, so it can move leadership or take a replica out of the ISR.
    ``destroys_data``: it destroys data a broker had written, not only its process.
    ``needs``: the cluster capabilities its nemesis uses, by protocol name
    (:mod:`faultline.cluster.protocol`). ``model_steps``: the reference model's step
    kinds that model it. ``coordinator_kind``: the kind that aims it at the broker
    coordinating the run's consumer group, which a group workload's schedule draws too
    (None: it has none); a txn workload's aims it at a transactional id's coordinator.
    ``workload_kinds``: workload name -> kinds aimed at its own clients (a group
    workload's consumers, a txn workload's producers paused), which only its schedules
    draw too, journaled with the targeted verb's kind (``crash``, ``pause``:
    :data:`faultline.nemeses.clients.AIMS`). ``fault`` and ``heal`` are the actions of every kind but those
    ``kind_actions`` gives their own; ask :meth:`actions`.
    """

    name: str
    fault: str
    heal: str
    kinds: tuple[str, ...]
    takes_node_out: bool
    on_nodes: bool
    destroys_data: bool
    needs: tuple[str, ...]
    model_steps: tuple[str, ...]
    coordinator_kind: str | None = None
    workload_kinds: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    kind_actions: Mapping[str, Actions] = field(default_factory=dict, hash=False)

    def actions(self, kind: str) -> Actions:
        """The fault and heal actions of ``kind``, a kind of this family: its own where
        ``kind_actions`` has them, else the family's."""
        return self.kind_actions.get(kind, Actions(self.fault, self.heal))

    @property
    def all_actions(self) -> frozenset[Actions]:
        """Every pair of actions a kind of this family has."""
        return frozenset((Actions(self.fault, self.heal), *self.kind_actions.values()))


#: Every family, in the order a spec lists them.
FAMILIES: Mapping[str, Family] = {f.name: f for f in (
    Family("kill", "kill", "start", ("kill",), takes_node_out=True, on_nodes=True,
           destroys_data=False, needs=("Killable",), model_steps=("crash", "restart"),
           coordinator_kind="kill-coordinator"),
    Family("pause", "pause", "resume", ("pause",), takes_node_out=True, on_nodes=True,
           destroys_data=False, needs=("Pausable",), model_steps=("pause", "resume"),
           coordinator_kind="pause-coordinator"),
    Family("stop", "stop", "start", ("stop",), takes_node_out=True, on_nodes=True,
           destroys_data=False, needs=("Stoppable", "Killable"), model_steps=("stop", "restart"),
           coordinator_kind="stop-coordinator"),
    Family("partition", "partition", "heal", PARTITION_KINDS, takes_node_out=False, on_nodes=True,
           destroys_data=False, needs=("Partitionable",),
           model_steps=("isolate", "cut", "cut-ctrl", "heal"), coordinator_kind="isolate-coordinator"),
    Family("toxics", "toxic", "clear-toxics", TOXIC_KINDS, takes_node_out=False, on_nodes=False,
           destroys_data=False, needs=("Toxifiable",), model_steps=("toxic-request", "toxic-reply")),
    Family("wipe", "wipe", "start", ("wipe",), takes_node_out=True, on_nodes=True,
           destroys_data=True, needs=("Killable", "Wipeable"), model_steps=("wipe",)),
    Family("lose-unflushed", "lose-unflushed", "start", ("lose-unflushed",), takes_node_out=True,
           on_nodes=True, destroys_data=True, needs=("Killable",),
           model_steps=("lose-unflushed", "flush")),
    # at worst a degraded link is a cut one (an isolation of the node, controller link too)
    Family("links", "degrade", "restore", LINK_KINDS, takes_node_out=False, on_nodes=True,
           destroys_data=False, needs=("Degradable",), model_steps=("isolate", "cut", "cut-ctrl", "heal")),
    # a crashed client's sends in flight: the request lost, or the reply (no broker touched);
    # a paused one's sent requests land at once and the rest wait with it; a consumer sends
    # none
    Family("clients", "crash-client", "restart-client", CLIENT_KINDS, takes_node_out=False,
           on_nodes=False, destroys_data=False, needs=(), model_steps=("toxic-request", "toxic-reply"),
           workload_kinds={"group": CONSUMER_KINDS, "txn": TXN_CLIENT_KINDS},
           kind_actions=dict.fromkeys(("pause-consumer", "pause-producer"),
                                      Actions("pause-client", "resume-client"))),
    # a broker's wall clock set off: it neither takes a node out nor moves leadership
    # (replication and fencing do not rest on wall clocks), so it permits nothing and
    # the model has no step for it (docs/design.md, "Clock faults")
    Family("clock", "clock", "reset-clock", CLOCK_KINDS, takes_node_out=False, on_nodes=False,
           destroys_data=False, needs=("Skewable",), model_steps=()),
)}


def family_of_fault(action: str) -> Family | None:
    """The family one of whose kinds' fault action is ``action`` (a history op's ``f``), or
    None for a heal or an action of no family."""
    return _BY_FAULT.get(action)


_BY_FAULT: Mapping[str, Family] = {a.fault: f for f in FAMILIES.values() for a in f.all_actions}
