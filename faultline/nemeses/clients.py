"""crash-client / restart-client: kill a client under test mid-send, later start its
replacement (:mod:`faultline.workloads.crashable` says how a producer is killed and what
its open sends become).

The clients are the workload's, not the cluster's: the runner hands them over with
:meth:`ClientsNemesis.bind` once the workload exists (:class:`CrashableClients`); a
crash before that, or of a workload whose clients cannot crash, is a NemesisError.

The invoke value names the producer (``clients``, by index from 0) and the completion
says what was killed: ``processes``, the history processes the killed client used (no
later op has them), ``pid`` and ``sends``, how many of its sends it left open, journaled
``info`` before the completion. A ``restart-client`` starts the replacement, whose
``processes`` is its new process number.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Any, Protocol, runtime_checkable

from faultline.cluster.protocol import Cluster
from faultline.errors import FaultlineError, NemesisError
from faultline.history import Op
from faultline.nemeses.base import choose, completed
from faultline.nemeses.schedule import ScheduledFault


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
    """``crash-client`` kills one producer; ``restart-client`` starts the replacement of
    the crashed producers its ``clients`` names (without: of every one)."""

    family = "clients"

    def __init__(self) -> None:
        self._clients: CrashableClients | None = None
        self._crashed: set[int] = set()
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
            raise NemesisError("no crashable clients: client crashes need the queue or txn workload, "
                               "bound before the main phase")
        return self._clients

    def plan(self, step: ScheduledFault, busy: Collection[int]) -> dict[str, Any]:
        return {"clients": [choose(range(self.workload.clients), step.pick)]}

    def invoke(self, op: Op) -> Op:
        value = op.value or {}
        try:
            if op.f == "crash-client":
                [index] = value["clients"]
                with self._lock:
                    self._crashed.add(index)
                done = self.workload.crash_client(index)
                return completed(op, result=f"killed producer {index} (pid {done['pid']}, processes "
                                            f"{done['processes']}); {done['sends']} sends left open",
                                 **done)
            if op.f == "restart-client":
                return completed(op, **self._restart(value.get("clients")))
        except FaultlineError as e:
            raise NemesisError(str(e)) from e
        raise NemesisError(f"the 'clients' nemesis cannot {op.f!r}")

    @property
    def crashed(self) -> list[int]:
        """The producers this nemesis crashed and has not restarted."""
        with self._lock:
            return sorted(self._crashed)

    def _restart(self, wanted: list[int] | None = None) -> dict[str, Any]:
        """Restart the crashed producers among ``wanted`` (None: every crashed one)."""
        with self._lock:
            crashed = sorted(self._crashed if wanted is None else self._crashed & set(wanted))
            self._crashed -= set(crashed)
        processes: list[int] = []
        results: list[str] = []
        for index in crashed:
            done = self.workload.restart_client(index)
            processes += done["processes"]
            results.append(done.get("result", f"producer {index} restarted as process "
                                              f"{done['processes']}"))
        return {"clients": crashed, "processes": processes,
                "result": "; ".join(results) or "no client was crashed"}

    def teardown(self) -> None:
        """Start the replacement of any producer still crashed (none once the workload stops)."""
        if self._clients is not None:
            self._restart()


@runtime_checkable
class TakesClients(Protocol):
    """A nemesis package that may crash clients: :meth:`bind_clients` hands it the workload's."""

    def bind_clients(self, clients: CrashableClients) -> None: ...
