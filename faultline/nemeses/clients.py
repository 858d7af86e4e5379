"""crash-client / restart-client: kill a client under test mid-op, later start its
replacement; pause-client / resume-client: stop a client (SIGSTOP) and continue it
(:mod:`faultline.workloads.crashable` says how a client is killed and what its open ops
become).

The clients are the workload's, not the cluster's: the runner hands them over with
:meth:`ClientsNemesis.bind` once the workload exists (:class:`CrashableClients`); a
crash before that, or of a workload whose clients cannot crash, is a NemesisError.

The invoke value names the client: ``clients``, a producer by index from 0, or
``consumers``, a group consumer by index from 0 (:data:`ROLES`). A crash's completion
says what was killed: ``processes``, the history processes the killed client used (no
later op has them), ``pid`` and, of a producer, ``sends``, how many of its sends it left
open, journaled ``info`` before the completion. A ``restart-client`` starts the
replacement, whose ``processes`` is its new process number. A ``pause-client`` stops
the client's process and its ``resume-client`` continues it (its processes go on). A
``stop-client`` has a consumer leave the group (it closes, its process ends; completion
as a crash's), and its ``start-client`` starts a new member in its slot (as a restart).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from typing import Any, Protocol, TypeVar, runtime_checkable

from faultline.cluster.protocol import Cluster
from faultline.errors import FaultlineError, NemesisError
from faultline.history import Op
from faultline.nemeses.base import choose, completed
from faultline.nemeses.schedule import ScheduledFault

T = TypeVar("T")

#: The keys of a nemesis value that name clients: ``clients`` the producers, ``consumers``
#: the group consumers, each by index from 0.
ROLES = ("clients", "consumers")


class ClientChild(Protocol):
    """One client in a child process (:class:`faultline.workloads.crashable.CrashableChild`);
    each call but ``held`` and ``committed`` returns the fields the history journals.
    ``held``: how many partitions its live member holds by its own journal, None when
    none runs; FaultlineError for a client that is no group member. ``committed``: how
    many transactions it and its replacements committed; FaultlineError for a client that
    is no transactional producer."""

    def crash(self) -> dict[str, Any]: ...
    def restart(self) -> dict[str, Any]: ...
    def pause(self) -> dict[str, Any]: ...
    def resume(self) -> dict[str, Any]: ...
    def stop(self) -> dict[str, Any]: ...
    def held(self) -> int | None: ...
    def committed(self) -> int: ...


@runtime_checkable
class ChildClients(Protocol):
    """A workload whose clients run in child processes: ``child(role, index)`` is client
    ``index`` of ``role`` (:data:`ROLES`), FaultlineError when there is none such;
    ``children(role)`` how many of ``role`` do, numbered from 0."""

    def child(self, role: str, index: int) -> ClientChild: ...

    def children(self, role: str) -> int: ...


@runtime_checkable
class CrashableClients(Protocol):
    """A workload whose clients can be crashed: ``clients`` of them, numbered from 0;
    ``crash_client`` kills one and ``restart_client`` replaces it, each returning the
    fields the history journals (:mod:`faultline.workloads.crashable`)."""

    @property
    def clients(self) -> int: ...

    def crash_client(self, index: int) -> dict[str, Any]: ...

    def restart_client(self, index: int) -> dict[str, Any]: ...


class ClientsNemesis:
    """``crash-client`` kills one client; ``restart-client`` starts the replacement of
    the crashed clients its ``clients`` or ``consumers`` names (without either: of every
    crashed producer); ``pause-client`` stops one client, ``resume-client`` continues the
    paused ones it names; ``stop-client`` has one consumer leave, ``start-client`` starts
    the stopped ones it names again."""

    family = "clients"

    def __init__(self) -> None:
        self._clients: CrashableClients | None = None
        self._crashed: dict[str, set[int]] = {role: set() for role in ROLES}
        self._paused: dict[str, set[int]] = {role: set() for role in ROLES}
        self._stopped: dict[str, set[int]] = {role: set() for role in ROLES}
        self._lock = threading.Lock()

    def setup(self, cluster: Cluster) -> None:
        """Nothing of the cluster is needed: the clients come by :meth:`bind`."""

    def bind(self, clients: CrashableClients) -> None:
        """The clients to crash: the workload's, once it exists."""
        self._clients = clients

    @property
    def workload(self) -> CrashableClients:
        """The clients bound; NemesisError when none are."""
        if self._clients is None:
            raise NemesisError("no crashable clients: client crashes need the queue, txn or group "
                               "workload, bound before the main phase")
        return self._clients

    def plan(self, step: ScheduledFault, busy: Collection[int]) -> dict[str, Any]:
        """The client ``step`` aims at: of the role its kind names (:data:`AIMS`), the one
        its ``pick`` chooses; journaled as the targeted verb's (``kind`` ``crash`` or
        ``pause``). NemesisError when the workload has none of that role to fault."""
        role, kind = AIMS[step.kind]
        count = self.workload.clients if role == "clients" else self._child_clients().children(role)
        if count == 0:
            raise NemesisError(f"no {_NAMES[role]} runs in a child process to {kind}")
        return {role: [choose(range(count), step.pick)], "kind": kind}

    def invoke(self, op: Op) -> Op:
        value = op.value or {}
        role = "consumers" if "consumers" in value else "clients"
        try:
            if op.f == "crash-client":
                [index] = value[role]
                with self._lock:
                    self._crashed[role].add(index)
                    self._paused[role].discard(index)
                return completed(op, **self._crash(role, index))
            if op.f == "restart-client":
                return completed(op, **self._restart(role, value.get(role)))
            if op.f == "stop-client":
                [index] = value[role]
                done = self._child(role, index).stop()
                with self._lock:
                    self._stopped[role].add(index)
                return completed(op, result=f"consumer {index} left the group (pid {done['pid']}, "
                                            f"processes {done['processes']})", **done)
            if op.f == "start-client":
                return completed(op, **self._restart(role, value.get(role), self._stopped))
            if op.f == "pause-client":
                [index] = value[role]
                done = self._child(role, index).pause()
                with self._lock:
                    self._paused[role].add(index)
                return completed(op, result=f"paused {_NAMES[role]} {index} (pid {done['pid']})", **done)
            if op.f == "resume-client":
                return completed(op, **self._resume(role, value.get(role)))
        except FaultlineError as e:
            raise NemesisError(str(e)) from e
        raise NemesisError(f"the 'clients' nemesis cannot {op.f!r}")

    @property
    def crashed(self) -> list[int]:
        """The producers this nemesis crashed and has not restarted."""
        return self.crashed_of("clients")

    def crashed_of(self, role: str) -> list[int]:
        """The clients of ``role`` (:data:`ROLES`) this nemesis crashed and has not restarted."""
        with self._lock:
            return sorted(self._crashed[role])

    def paused_of(self, role: str) -> list[int]:
        """The clients of ``role`` this nemesis paused and has not resumed."""
        with self._lock:
            return sorted(self._paused[role])

    def stopped_of(self, role: str) -> list[int]:
        """The clients of ``role`` this nemesis stopped and has not started."""
        with self._lock:
            return sorted(self._stopped[role])

    def holdings(self) -> dict[int, int | None]:
        """Consumer index -> how many partitions its live member holds, by the member's own
        journal (None: none runs, it is crashed or stopped); what ``wait until consumers
        hold partitions`` reads. NemesisError without consumers in child processes."""
        return self._each("consumers", lambda child: child.held())

    def commits(self) -> dict[int, int]:
        """Producer index -> how many transactions it and its replacements committed, by
        their journals; what ``wait until client N has committed`` reads. NemesisError
        without transactional producers in child processes."""
        return self._each("clients", lambda child: child.committed())

    def _each(self, role: str, read: Callable[[ClientChild], T]) -> dict[int, T]:
        """Index -> ``read`` of each client of ``role`` in a child process; NemesisError
        where one cannot be read so."""
        clients = self._child_clients()
        try:
            return {i: read(clients.child(role, i)) for i in range(clients.children(role))}
        except FaultlineError as e:
            raise NemesisError(str(e)) from e

    def _child(self, role: str, index: int) -> ClientChild:
        return self._child_clients().child(role, index)

    def _child_clients(self) -> ChildClients:
        workload = self.workload
        if not isinstance(workload, ChildClients):
            raise NemesisError("these clients share a process: none is paused, stopped or crashed "
                               "alone (a run gives each client a process of its own when its "
                               "nemesis crashes or pauses clients)")
        return workload

    def _crash(self, role: str, index: int) -> dict[str, Any]:
        if role == "clients":
            done = self.workload.crash_client(index)
            return {**done, "result": f"killed producer {index} (pid {done['pid']}, processes "
                                      f"{done['processes']}); {done['sends']} sends left open"}
        done = self._child(role, index).crash()
        return {**done, "result": f"killed consumer {index} (pid {done['pid']}, processes "
                                  f"{done['processes']})"}

    def _restart(self, role: str, wanted: list[int] | None = None,
                 down: dict[str, set[int]] | None = None) -> dict[str, Any]:
        """Restart the clients of ``role`` among ``wanted`` (None: every one) that are down
        in ``down``: :attr:`_crashed` (the default) or :attr:`_stopped`."""
        down = self._crashed if down is None else down
        with self._lock:
            back = sorted(down[role] if wanted is None else down[role] & set(wanted))
            down[role] -= set(back)
        processes: list[int] = []
        results: list[str] = []
        for index in back:
            done = (self.workload.restart_client(index) if role == "clients"
                    else self._child(role, index).restart())
            processes += done["processes"]
            results.append(done.get("result", f"{_NAMES[role]} {index} restarted as process "
                                              f"{done['processes']}"))
        return {role: back, "processes": processes,
                "result": "; ".join(results) or
                          f"no client was {'crashed' if down is self._crashed else 'stopped'}"}

    def _resume(self, role: str, wanted: list[int] | None = None) -> dict[str, Any]:
        """Continue the paused clients of ``role`` among ``wanted`` (None: every paused one)."""
        with self._lock:
            paused = sorted(self._paused[role] if wanted is None else self._paused[role] & set(wanted))
            self._paused[role] -= set(paused)
        results = [self._child(role, index).resume().get("result", f"{_NAMES[role]} {index} resumed")
                   for index in paused]
        return {role: paused, "result": "; ".join(results) or "no client was paused"}

    def teardown(self) -> None:
        """Continue every client still paused and start the replacement of any still
        crashed or stopped (none once the workload stops)."""
        if self._clients is not None:
            for role in ROLES:
                self._resume(role)
                self._restart(role)
                self._restart(role, down=self._stopped)


#: What a role's client is called in a result.
_NAMES = {"clients": "producer", "consumers": "consumer"}
#: A kind of the ``clients`` family (:data:`faultline.faults.FAMILIES`) -> the role it aims
#: at (:data:`ROLES`) and the kind its ops journal, the targeted verb's.
AIMS: dict[str, tuple[str, str]] = {
    "crash": ("clients", "crash"),
    "pause-producer": ("clients", "pause"),
    "crash-consumer": ("consumers", "crash"),
    "pause-consumer": ("consumers", "pause"),
}


@runtime_checkable
class TakesClients(Protocol):
    """A nemesis package that may crash clients: :meth:`bind_clients` hands it the workload's."""

    def bind_clients(self, clients: CrashableClients) -> None: ...
