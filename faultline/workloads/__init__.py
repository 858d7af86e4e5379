"""Workloads: the clients under test, journaling every op to the history.

A workload is chosen by ``spec.workload.name`` (:func:`workload_for`): the queue
(:mod:`.queue`: producers and consumers through confluent-kafka, with the classification
of send outcomes in :mod:`.outcomes`), the group (:mod:`.group`: the queue's producers,
consumers subscribed in one group that commit; with the Java client, :mod:`.java_group`)
or the transactions (:mod:`.txn`: transactional producers, the queue's consumers; with the
Java client, :mod:`.java_txn`); a queue or txn test that crashes clients runs each producer
in a child process (:mod:`.crashable`), or with the Java client in a JVM of its own
(:mod:`.java_crashable`, :mod:`.java_txn`); a group test that crashes or pauses clients, its consumers too
(:mod:`.group_crashable`; with the Java client, :mod:`.java_group`). :mod:`.drain` reads every
partition back after the run; :mod:`.clients` is what every client shares (process
numbers, unique values, the journal, the client log, client configs).

May import: errors, faults, spec, history, and cluster's kafka_dist (the Java client
is built against the broker's distribution, :mod:`.java_client`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from faultline.errors import SpecError
from faultline.history import HistoryWriter
from faultline.spec import TestSpec
from faultline.workloads.clients import ClientLog, ProcessIds, WorkloadStats
from faultline.workloads.crashable import CrashableQueueWorkload
from faultline.workloads.group import GroupWorkload
from faultline.workloads.group_crashable import CrashableGroupWorkload
from faultline.workloads.java_client import JavaQueueWorkload
from faultline.workloads.java_crashable import CrashableJavaQueueWorkload
from faultline.workloads.java_group import CrashableJavaGroupWorkload, JavaGroupWorkload
from faultline.workloads.java_txn import CrashableJavaTxnWorkload, JavaTxnWorkload
from faultline.workloads.queue import QueueWorkload
from faultline.workloads.txn import CrashableTxnWorkload, TxnWorkload


class Workload(Protocol):
    """What the runner drives: clients that journal their ops while they run.

    ``start`` starts the clients and returns once they issue ops (the run's time limit
    counts from then: a JVM takes seconds to start); ``request_stop`` asks them to stop issuing ops;
    ``stop`` waits (at most ``timeout`` seconds) until every op in flight completed or
    was journaled ``info``; ``running`` is false once every client has stopped (also
    by an error). ``processes`` hands out the history's process numbers, so the drain's
    never clash with a client's.
    """

    processes: ProcessIds

    def start(self) -> None: ...
    def request_stop(self) -> None: ...
    def stop(self, timeout: float | None = None) -> None: ...
    @property
    def running(self) -> bool: ...
    def stats(self) -> WorkloadStats: ...


class MakeWorkload(Protocol):
    """How a workload is made: ``cls(spec, bootstrap, history, client_log=...)``, the
    client log (where the client library's own lines go) optional."""

    def __call__(self, spec: TestSpec, bootstrap: str, history: HistoryWriter, *,
                 client_log: ClientLog | None = None) -> Workload: ...


#: workload name -> client under test (``spec.workload.client``) -> the :class:`Workload`
#: class that drives it.
WORKLOADS: Mapping[str, Mapping[str, MakeWorkload]] = {
    "queue": {"librdkafka": QueueWorkload, "java": JavaQueueWorkload},
    "txn": {"librdkafka": TxnWorkload, "java": JavaTxnWorkload},
    "group": {"librdkafka": GroupWorkload, "java": JavaGroupWorkload},
}
#: A workload class of :data:`WORKLOADS` -> the one that drives the same clients when the
#: nemesis crashes or pauses clients.
CRASHABLE: Mapping[MakeWorkload, MakeWorkload] = {
    QueueWorkload: CrashableQueueWorkload,
    JavaQueueWorkload: CrashableJavaQueueWorkload,
    TxnWorkload: CrashableTxnWorkload,
    GroupWorkload: CrashableGroupWorkload,
    JavaTxnWorkload: CrashableJavaTxnWorkload,
    JavaGroupWorkload: CrashableJavaGroupWorkload,
}


def workload_for(spec: TestSpec) -> MakeWorkload:
    """The workload class ``spec.workload.name`` names, for the client
    ``spec.workload.client`` names (its :data:`CRASHABLE` one when the nemesis crashes
    clients); SpecError naming the workloads (or that workload's clients) there are when
    it is not one."""
    clients = WORKLOADS.get(spec.workload.name)
    if clients is None:
        raise SpecError(f"workload {spec.workload.name!r} is not available; "
                        f"workloads: {', '.join(WORKLOADS)}")
    make = clients.get(spec.workload.client)
    if make is None:
        raise SpecError(f"workload {spec.workload.name!r} has no {spec.workload.client} client; "
                        f"clients: {', '.join(clients)}")
    return CRASHABLE[make] if spec.nemesis.crashes_clients else make
