"""The faults one partition saw, as one typed value: what every permission is decided by.

:class:`PartitionFaults` is made by :mod:`faultline.checkers.faults_seen` and read by
:mod:`faultline.checkers.guarantees`. Strings only at the edges: results.json keeps it as
its fault tokens (:meth:`PartitionFaults.tokens`, :meth:`PartitionFaults.from_tokens`; the
grammar below is docs/history.md's and the schema's contract), and a person reads it in
words (:meth:`PartitionFaults.words`).

Tokens: each family in ``families``; ``leader-fault``; and ``faulted>=N``, ``fenced>=N``,
``data-loss>=N`` for every N from 1 to the count, so a count of 3 is three tokens.

Imports nothing of the project but :mod:`faultline.faults`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from faultline.faults import FAMILIES

#: Faults a history may name beyond the spec's families: a restarted producer that may
#: have re-sent values (no workload does this yet).
OTHER_FAULTS: frozenset[str] = frozenset(("producer-restart",))
#: Faults on nodes (not on client links): they can move leadership or take a replica
#: out of the ISR.
NODE_FAULTS: frozenset[str] = frozenset(f.name for f in FAMILIES.values() if f.on_nodes)
#: Faults that destroy data a broker had written (not only its process).
DATA_LOSS_FAULTS: frozenset[str] = frozenset(f.name for f in FAMILIES.values() if f.destroys_data)

_LEADER = "leader-fault"
#: token name -> the field its count is.
_COUNTS = {"faulted": "faulted", "fenced": "fenced", "data-loss": "data_loss"}


@dataclass(frozen=True, slots=True)
class PartitionFaults:
    """The faults one partition saw (see :mod:`faultline.checkers.faults_seen` for how each
    is derived).

    ``families``: the fault families that touched it (and :data:`OTHER_FAULTS`);
    ``leader_fault``: a fault hit its leader, or an election moved it; ``faulted``: how
    many of its replicas may have fallen out of step with the leader; ``fenced``: how many
    a fault may have fenced or restarted uncleanly, over the run; ``data_loss``: the most
    of its replicas whose data was destroyed at once.
    """

    families: frozenset[str] = frozenset()
    leader_fault: bool = False
    faulted: int = 0
    fenced: int = 0
    data_loss: int = 0

    def __or__(self, other: PartitionFaults) -> PartitionFaults:
        """Every fault either saw: the families of both, the larger counts."""
        return PartitionFaults(self.families | other.families, self.leader_fault or other.leader_fault,
                               max(self.faulted, other.faulted), max(self.fenced, other.fenced),
                               max(self.data_loss, other.data_loss))

    def tokens(self) -> list[str]:
        """results.json's tokens for it, sorted."""
        out = [*self.families, *([_LEADER] if self.leader_fault else [])]
        for name, field in _COUNTS.items():
            out += [f"{name}>={n}" for n in range(1, getattr(self, field) + 1)]
        return sorted(out)

    @classmethod
    def from_tokens(cls, tokens: Iterable[str]) -> PartitionFaults:
        """The value results.json's ``tokens`` stand for. Raises ValueError, one line, for a
        token of no family or count, or counts that do not run from 1 to their largest."""
        families: set[str] = set()
        leader = False
        seen: dict[str, set[int]] = {name: set() for name in _COUNTS}
        for token in tokens:
            name, sep, n = token.partition(">=")
            if token == _LEADER:
                leader = True
            elif not sep and (token in FAMILIES or token in OTHER_FAULTS):
                families.add(token)
            elif sep and name in seen and n.isdigit() and n == str(int(n)) and int(n) > 0:
                seen[name].add(int(n))
            else:
                raise ValueError(f"{token!r} is no fault token: expected a fault family "
                                 f"({', '.join([*FAMILIES, *sorted(OTHER_FAULTS)])}), {_LEADER!r} "
                                 f"or {', '.join(f'{k}>=N' for k in _COUNTS)} with N >= 1")
        for name, ns in seen.items():
            if ns != set(range(1, len(ns) + 1)):
                raise ValueError(f"{name}>={max(ns)} without every {name}>=N below it: "
                                 "a count is given as each N from 1 to it")
        return cls(frozenset(families), leader, len(seen["faulted"]), len(seen["fenced"]),
                   len(seen["data-loss"]))

    def words(self) -> str:
        """It for a person, e.g. ``kill, partition, leader faulted or moved, 3 replicas
        faulted, 2 fenced``; empty when it saw none."""
        out = sorted(self.families)
        if self.leader_fault:
            out.append("leader faulted or moved")
        if self.faulted:
            out.append(f"{self.faulted} replica{'s' if self.faulted != 1 else ''} faulted")
        if self.fenced:
            out.append(f"{self.fenced} fenced")
        if self.data_loss:
            out.append(f"data destroyed on {self.data_loss} at once")
        return ", ".join(out)
