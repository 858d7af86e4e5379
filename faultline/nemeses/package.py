"""The nemesis package: the faults of a test, their schedule and their final heal.

The runner builds one with :meth:`NemesisPackage.from_spec`, calls ``setup()`` once
the cluster is up, ``run(until, history)`` in the main phase next to the workload,
and ``heal_all(history)`` afterwards, always (also on errors and Ctrl-C), so no test
has to remember to heal::

    package = NemesisPackage.from_spec(spec, cluster)
    package.setup()
    try:
        package.run(time.monotonic() + spec.time_limit_s, history)
    finally:
        package.heal_all(history)

Journal: each scheduled fault is two ops, an invoke and a completion, both
``type: "info"``, ``process: "nemesis"``, ``f`` the fault action (``kill``,
``partition``, ``toxic`` ...); its heal is two more with the heal action (``start``,
``heal``, ``clear-toxics`` ...). The invoke value names the targets (``nodes``,
``grudge``, ``leaders``), the completion adds ``result`` (and ``error`` on
failure). A fault whose invoke failed counts as possibly applied and is healed.
A fault with no target (every node busy, no leader) is journaled with an error
and skipped.

Faults run one at a time from one thread (as Jepsen's nemesis does): a slow action
delays the next, never overlaps it. The schedule's limits (``max_concurrent``, one
fault per family) hold at run time too: see :meth:`NemesisPackage.run`.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from faultline.cluster.protocol import Cluster
from faultline.errors import NemesisError
from faultline.faults import FAMILIES
from faultline.history import HistoryWriter, Op
from faultline.nemeses.base import COORDINATED_WORKLOADS, Nemesis, error_text
from faultline.nemeses.clients import ROLES, ClientsNemesis, CrashableClients
from faultline.nemeses.clock import ClockNemesis
from faultline.nemeses.kill import KillNemesis
from faultline.nemeses.links import LinksNemesis
from faultline.nemeses.lose_unflushed import LoseUnflushedNemesis
from faultline.nemeses.partition import PartitionNemesis
from faultline.nemeses.pause import PauseNemesis
from faultline.nemeses.schedule import ScheduledFault, build_schedule
from faultline.nemeses.stop import StopNemesis
from faultline.nemeses.toxics import ToxicsNemesis
from faultline.nemeses.wipe import WipeNemesis
from faultline.spec import TestSpec

log = logging.getLogger(__name__)

#: family (:data:`faultline.faults.FAMILIES`) -> a fresh nemesis for it.
NEMESES: Mapping[str, Callable[[], Nemesis]] = {
    "kill": KillNemesis,
    "pause": PauseNemesis,
    "stop": StopNemesis,
    "partition": PartitionNemesis,
    "toxics": ToxicsNemesis,
    "wipe": WipeNemesis,
    "lose-unflushed": LoseUnflushedNemesis,
    "links": LinksNemesis,
    "clients": ClientsNemesis,
    "clock": ClockNemesis,
}

#: Families whose faults take a whole node out; two of them never pick the same node.
NODE_FAMILIES = frozenset(f.name for f in FAMILIES.values() if f.takes_node_out)


@dataclass(slots=True)
class _Active:
    step: ScheduledFault
    nemesis: Nemesis
    value: dict[str, Any]


@dataclass
class NemesisPackage:
    """Drives ``schedule`` against ``cluster`` with one nemesis per family.

    Thread-safety: ``heal_all`` may be called from another thread while ``run`` is
    running; it stops ``run`` after the action in progress and heals.
    """

    cluster: Cluster
    schedule: Sequence[ScheduledFault]
    nemeses: Mapping[str, Nemesis]
    max_concurrent: int = 1
    _active: dict[ScheduledFault, _Active] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _set_up: bool = field(default=False, init=False, repr=False)
    _held: tuple[ScheduledFault, ...] = field(default=(), init=False, repr=False)

    @classmethod
    def from_spec(cls, spec: TestSpec, cluster: Cluster) -> NemesisPackage:
        """The package for ``spec.nemesis``: its schedule from ``spec.seed`` over
        ``spec.time_limit_s``, one nemesis per chosen family. No faults, no nemeses."""
        schedule = build_schedule(spec.nemesis, spec.seed, spec.time_limit_s, spec.kafka.nodes,
                                  coordinated=spec.workload.name in COORDINATED_WORKLOADS,
                                  workload=spec.workload.name)
        families = dict.fromkeys(spec.nemesis.faults)
        return cls(cluster, schedule, {f: NEMESES[f]() for f in families},
                   spec.nemesis.max_concurrent)

    def setup(self) -> None:
        """Bind every nemesis to the cluster; NemesisError if the backend lacks a capability."""
        for nemesis in self.nemeses.values():
            nemesis.setup(self.cluster)
        self._set_up = True

    def bind_clients(self, clients: CrashableClients) -> None:
        """Hand the workload's clients to the ``clients`` nemesis, if the schedule has one."""
        nemesis = self.nemeses.get("clients")
        if isinstance(nemesis, ClientsNemesis):
            nemesis.bind(clients)

    @property
    def main_phase_over(self) -> bool:
        """Never: a random schedule runs to the time limit."""
        return False

    @property
    def active(self) -> list[ScheduledFault]:
        """Steps applied (or possibly applied) and not yet healed. Never waits for an
        action in progress (a progress display reads it while a node is stopping)."""
        return list(self._held)

    def _publish(self) -> None:
        self._held = tuple(self._active)

    def run(self, until: float, history: HistoryWriter) -> None:
        """Execute the schedule until ``until`` (a ``time.monotonic()`` deadline) or until
        ``heal_all`` is called. Fault times count from this call. Faults still held at the
        deadline stay in effect for ``heal_all``. Never raises for a fault that failed:
        it is journaled with its error.

        A fault is held for its ``hold_s`` from the moment it took effect, so a slow
        start (a target read that waited on a stalled client link) never shortens it. A
        fault that comes due while its family is still held, or while ``max_concurrent``
        faults are, waits until the blocking fault heals plus the gap the schedule had
        planned between the two.
        """
        if not self._set_up:
            self.setup()
        t0 = time.monotonic()
        seq = itertools.count()
        # (due s, 0 heal / 1 fault, tie-breaker, step): heals run first at equal times
        queue: list[tuple[float, int, int, ScheduledFault]] = [
            (s.at_s, 1, next(seq), s) for s in self.schedule]
        heapq.heapify(queue)
        heal_due: dict[ScheduledFault, float] = {}
        #: a held fault -> the faults it blocks, each with the gap to keep after its heal
        waiting: dict[ScheduledFault, list[tuple[ScheduledFault, float]]] = {}
        while queue:
            at_s, is_fault, _, step = queue[0]
            if t0 + at_s > until:
                break
            if self._stop.wait(max(0.0, t0 + at_s - time.monotonic())):
                return
            heapq.heappop(queue)
            with self._lock:
                if self._stop.is_set():
                    return
                if not is_fault:
                    if step in self._active:
                        self._heal(self._active[step], history)
                    healed_s = time.monotonic() - t0
                    for blocked, gap in waiting.pop(step, []):
                        heapq.heappush(queue, (healed_s + gap, 1, next(seq), blocked))
                    continue
                blocking = self._blocking(step)
                if blocking:
                    first = min(blocking, key=lambda b: heal_due[b])
                    waiting.setdefault(first, []).append((step, max(0.0, step.at_s - first.end_s)))
                    continue
                self._apply(step, history)
                if step in self._active:
                    heal_due[step] = time.monotonic() - t0 + step.hold_s
                    heapq.heappush(queue, (heal_due[step], 0, next(seq), step))
        self._stop.wait(max(0.0, until - time.monotonic()))

    def _blocking(self, step: ScheduledFault) -> list[ScheduledFault]:
        """Held faults that keep ``step`` from starting now (same family, or capacity)."""
        held = list(self._active)
        same = [s for s in held if s.family == step.family]
        if same:
            return same
        return held if len(held) >= self.max_concurrent else []

    def heal_all(self, history: HistoryWriter | None = None) -> None:
        """Stop ``run`` and undo every fault still in effect; always heals everything.

        Each active fault gets its journaled heal op (when ``history`` is given); then
        every nemesis's ``teardown`` runs regardless, so a heal that failed is retried
        by force. Raises NemesisError only if a teardown could not heal, after trying
        every one.
        """
        self._stop.set()
        errors: list[str] = []
        with self._lock:
            try:
                for active in sorted(self._active.values(), key=lambda a: a.step.at_s):
                    if history is not None:
                        self._heal(active, history)
            except Exception as e:  # e.g. a closed history: the teardowns below still run
                log.error("journaled heal failed: %s", e)
                errors.append(f"heal: {e}")
            self._active.clear()
            self._publish()
            for family, nemesis in self.nemeses.items():
                try:
                    nemesis.teardown()
                except Exception as e:  # every nemesis must get its teardown
                    log.error("nemesis %s teardown failed: %s", family, e)
                    errors.append(f"{family}: {e}")
        if errors:
            raise NemesisError(f"could not heal every fault: {'; '.join(errors)}")

    def _busy(self) -> set[int]:
        busy: set[int] = set()
        for a in self._active.values():
            if a.step.family in NODE_FAMILIES:
                busy.update(int(n) for n in a.value.get("nodes", []))
        return busy

    def _apply(self, step: ScheduledFault, history: HistoryWriter) -> None:
        nemesis = self.nemeses[step.family]
        f = FAMILIES[step.family].actions(step.kind).fault
        try:
            value = nemesis.plan(step, self._busy())
        except Exception as e:  # journaled, the run goes on
            log.warning("nemesis %s %s skipped: %s", f, step.kind, e)
            history.append("nemesis", "info", f, {"kind": step.kind})
            history.append("nemesis", "info", f, {"kind": step.kind, "nodes": [], "result": "skipped"},
                           error=error_text(e))
            return
        value.setdefault("kind", step.kind)
        value["hold_s"] = step.hold_s
        invoke = history.append("nemesis", "info", f, value)
        self._active[step] = _Active(step, nemesis, value)
        self._publish()
        self._complete(nemesis, invoke, history)

    def _heal(self, active: _Active, history: HistoryWriter) -> None:
        f = FAMILIES[active.step.family].actions(active.step.kind).heal
        value = {k: v for k, v in active.value.items() if k in ("nodes", "kind", *ROLES)}
        invoke = history.append("nemesis", "info", f, value)
        self._active.pop(active.step, None)
        self._publish()
        self._complete(active.nemesis, invoke, history)

    @staticmethod
    def _complete(nemesis: Nemesis, invoke: Op, history: HistoryWriter) -> None:
        try:
            done = nemesis.invoke(invoke)
        except Exception as e:  # journaled; teardown heals what is left
            log.warning("nemesis %s failed: %s", invoke.f, e)
            history.append("nemesis", "info", invoke.f, invoke.value, error=error_text(e))
            return
        if done.error is not None:
            log.warning("nemesis %s failed: %s", invoke.f, done.error)
        history.append("nemesis", "info", done.f, done.value, error=done.error)
