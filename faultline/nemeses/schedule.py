"""The nemesis schedule: which fault starts when, and for how long. Pure.

A schedule is a tuple of :class:`ScheduledFault` values computed from the nemesis spec, the
seed, the time limit and the node count, before the run starts. The same inputs
always give the same schedule (the random stream is seeded from a string, which
Python hashes with SHA-512, so ``PYTHONHASHSEED`` does not matter).

How it is drawn, with ``I`` the interval:

- the first fault starts after ``I * U(0.5, 1.5)`` (a warm-up with no faults);
- each fault picks a family uniformly from the chosen ones, then a kind within the
  family (e.g. ``isolate-leader`` for ``partition``, ``latency`` for ``toxics``; in a
  group or txn workload's run, ``kill-coordinator`` for ``kill`` too, in a group
  workload's ``crash-consumer`` or ``pause-consumer`` for ``clients``, and in a txn
  workload's ``pause-producer``: see :func:`kinds`),
  is held for ``I * U(0.5, 1.5)`` and carries ``pick``, a 32-bit random integer the
  nemesis uses at invoke time to choose among live targets;
- the next start is ``I * U(0.5, 1.5)`` after this one (so starts are at least
  ``I / 2`` apart, and at most three faults overlap whatever ``max_concurrent`` allows);
- a start is delayed while ``max_concurrent`` faults are held, or while a fault of
  the same family is held (one partition, one set of toxics, ... at a time), to
  ``I * U(0.2, 0.5)`` after the blocking fault heals: the quiet period;
- every fault is healed by ``time_limit_s``; no fault starts when less than
  ``I / 4`` would be left.

Targets are *not* chosen here: the leader of a partition or the active controller
is only known at invoke time. ``pick`` makes that choice reproducible given the
same live state.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from faultline.errors import SpecError
from faultline.faults import FAMILIES
from faultline.spec import FAULTS, NemesisSpec


@dataclass(frozen=True, slots=True)
class ScheduledFault:
    """One scheduled fault: start ``at_s`` seconds into the main phase, heal ``hold_s`` later.

    ``family`` is one of :data:`faultline.spec.FAULTS`; ``kind`` the variant within it
    (the family name itself for one-variant families); ``pick`` a seeded integer used
    to choose targets among live candidates.
    """

    at_s: float
    family: str
    kind: str
    hold_s: float
    pick: int

    @property
    def end_s(self) -> float:
        """When the fault is healed, in seconds into the main phase."""
        return self.at_s + self.hold_s


def kinds(family: str, nodes: int, coordinated: bool = False, workload: str = "queue") -> tuple[str, ...]:
    """The kinds of ``family`` that make sense on a cluster of ``nodes`` nodes; with
    ``coordinated`` (the run's workload has a coordinator to aim at: a group workload's
    group, a txn workload's transactional ids) its ``coordinator_kind`` too; then its
    ``workload_kinds`` of the run's ``workload`` (a group workload's consumer faults, a
    txn workload's producer pauses), last.

    Partitions and degraded links need two nodes; ``bridge`` needs three and ``ring``
    four (on three nodes a ring is fully connected). Raises SpecError for an unknown family.
    """
    if family not in FAULTS:
        raise SpecError(f"unknown fault {family!r}; known: {', '.join(FAULTS)}")
    if family in ("partition", "links") and nodes < 2:
        return ()
    coordinator = FAMILIES[family].coordinator_kind
    return tuple(k for k in FAMILIES[family].kinds
                 if not (k == "bridge" and nodes < 3) and not (k == "ring" and nodes < 4)
                 ) + ((coordinator,) if coordinated and coordinator is not None else ()) + (
                     FAMILIES[family].workload_kinds.get(workload, ()))


def build_schedule(nemesis: NemesisSpec, seed: int, time_limit_s: float, nodes: int,
                   coordinated: bool = False, workload: str = "queue") -> tuple[ScheduledFault, ...]:
    """The schedule for one run; deterministic in its arguments. ``coordinated``: the
    run's workload has a coordinator to aim at (the group or txn workload), so kinds aimed
    at it are drawn too; ``workload``: the run's workload's name, whose kinds aimed at its
    own clients are drawn too (:func:`kinds`).

    Guarantees, for the returned steps: sorted by ``at_s``; at every instant at most
    ``nemesis.max_concurrent`` steps are held and at most one per family; every
    ``end_s <= time_limit_s``. Raises SpecError when a chosen family cannot run on
    ``nodes`` nodes (a partition on one node).
    """
    families = _families(nemesis.faults, nodes)
    if not families:
        return ()
    interval = nemesis.interval_s
    rng = random.Random(f"faultline-nemesis:{seed}")
    steps: list[ScheduledFault] = []
    t = interval * rng.uniform(0.5, 1.5)
    while True:
        family = rng.choice(families)
        kind = rng.choice(_set_kinds(nemesis, family, nodes, coordinated, workload))
        hold = interval * rng.uniform(0.5, 1.5)
        quiet = interval * rng.uniform(0.2, 0.5)
        gap = interval * rng.uniform(0.5, 1.5)
        pick = rng.getrandbits(32)
        t = round(_first_free(steps, t, family, nemesis.max_concurrent, quiet), 3)
        if t + interval / 4 > time_limit_s:
            break
        hold = math.floor(min(hold, time_limit_s - t) * 1000) / 1000
        steps.append(ScheduledFault(t, family, kind, hold, pick))
        t += gap
    return tuple(steps)


def _set_kinds(nemesis: NemesisSpec, family: str, nodes: int, coordinated: bool,
               workload: str) -> tuple[str, ...]:
    """The kinds of ``family`` to draw from (:func:`kinds`): a degraded link only the way the
    spec sets, when it sets one of ``link_loss_percent`` and ``link_rate_kbit`` (both or
    neither: either way)."""
    out = kinds(family, nodes, coordinated, workload)
    if family == "links" and (nemesis.link_loss_percent is None) != (nemesis.link_rate_kbit is None):
        return ("loss",) if nemesis.link_loss_percent is not None else ("bandwidth",)
    return out


def _families(faults: Sequence[str], nodes: int) -> list[str]:
    out: list[str] = []
    for f in dict.fromkeys(faults):  # de-duplicated, order kept
        if not kinds(f, nodes):
            raise SpecError(f"fault {f!r} needs at least 2 nodes; this cluster has {nodes}")
        out.append(f)
    return out


def _first_free(steps: Sequence[ScheduledFault], t: float, family: str, max_concurrent: int,
                quiet: float) -> float:
    """The earliest time >= t at which a ``family`` fault may start.

    A fault counts as held until ``quiet`` seconds after it heals, so a fault that
    had to wait always follows a quiet period.
    """
    # Starts are at least I/2 apart and holds at most 3I/2 long, so only the last few
    # steps can still be held: looking at eight keeps building linear.
    recent = steps[-8:]
    while True:
        held = [s for s in recent if s.end_s + quiet > t]
        same = [s for s in held if s.family == family]
        if same:
            blocking = same
        elif len(held) >= max_concurrent:
            blocking = held
        else:
            return t
        t = min(s.end_s for s in blocking) + quiet
