"""Group consumers that can crash or pause: in a group test whose nemesis crashes or
pauses clients, each consumer of :mod:`.group` runs in a child process of its own
(:class:`CrashableConsumer`, a :class:`.crashable.CrashableChild`), as the producers do
(:mod:`.crashable`), so that a crash is a SIGKILL of a real member and a pause its SIGSTOP.

The child runs a :class:`.group.GroupConsumer` journaling through a
:class:`.crashable.PipeJournal`: the journal's contract is the group workload's, each op
journaled at its own time. A member has one op open at a time (a ``poll`` or a
``commit``); a crash ends it ``info`` with the error :data:`.outcomes.CRASH_ERROR`, and
the killed member's process takes no later op. Its replacement (:meth:`CrashableChild.restart`)
is a new member under a new process number, in the same slot (with static membership,
``consumer.static``, the same ``group.instance.id``). A stop (:meth:`CrashableChild.stop`)
has the member close at once, leaving the group (its partitions revoked), until a restart.
"""

from __future__ import annotations

import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from faultline.history import HistoryWriter, PendingOp, Process, TimedOp
from faultline.spec import TestSpec
from faultline.workloads.clients import ProcessIds
from faultline.workloads.crashable import (
    CrashableChild,
    CrashableQueueWorkload,
    PipeJournal,
    child_started,
)
from faultline.workloads.group import REBALANCES, GroupConsumer, held_after
from faultline.workloads.outcomes import CRASH_ERROR
from faultline.workloads.queue import ConsumerClient


class CrashableGroupWorkload(CrashableQueueWorkload):
    """The group workload with its producers and its consumers in child processes
    (:class:`.crashable.CrashableProducer`, :class:`CrashableConsumer`); the same contract
    as :class:`.group.GroupWorkload`."""

    def _consumer(self, spec: TestSpec, bootstrap: str, process: int) -> ConsumerClient:
        return CrashableConsumer(spec, bootstrap, self.history, process, self.processes,
                                 slot=process - spec.workload.producers)


class CrashableConsumer(CrashableChild):
    """One member of the group in a child process; what :class:`.queue.QueueWorkload`
    drives of a consumer (``run``, the counts), and what a :class:`.crashable.CrashableChild`
    does to its child. ``slot`` is its index among the consumers, kept by its replacements."""

    def __init__(self, spec: TestSpec, bootstrap: str, history: HistoryWriter, first_process: int,
                 processes: ProcessIds, *, slot: int) -> None:
        super().__init__(history, first_process, processes, f"consumer {slot}")
        self.spec, self.bootstrap, self.slot = spec, bootstrap, slot
        self.polls = 0
        self.records = 0
        #: process -> its open op's ``f`` and invoke value
        self._open: dict[Process, tuple[str, Any]] = {}
        #: the last process that journaled a rebalance or was retired, and the partitions it holds
        self._held: tuple[Process | None, frozenset[tuple[str, int]]] = (None, frozenset())

    def _target(self, conn: Connection, stop: Connection, first_process: int) -> tuple[Any, tuple[Any, ...]]:
        return _child_main, (conn, stop, self.spec, self.bootstrap, first_process, self.processes,
                             self.slot, time.monotonic_ns() - self.history.now())

    def held(self) -> int | None:
        """How many partitions the live child's member holds, by its own journal
        (:func:`.group.held_after`); None when no child runs (crashed or stopped)."""
        with self._lock:
            if self._child is None or self._killed or self._left:
                return None
            holder, held = self._held
            return len(held) if holder == self._processes[-1] else 0

    def _count(self, ns: int, op: list[Any]) -> TimedOp:
        process, type, f, value, error = op
        if type == "info" or f in REBALANCES:  # what held_after reads: not each poll
            holder, held = self._held
            self._held = (process, held_after(held if holder == process else frozenset(), type, f, value))
        if type == "invoke":
            self._open[process] = (f, value)
        else:
            self._open.pop(process, None)
            if f == "poll":
                self.polls += 1
                self.records += len(value["records"]) if value else 0
        return ns, (process, type, f, value, error)

    def _end_open(self) -> None:
        """Journal the op the killed member left open, ``info`` with :data:`.outcomes.CRASH_ERROR`."""
        ops: list[PendingOp] = [(process, "info", f, value, CRASH_ERROR)
                                for process, (f, value) in self._open.items()]
        self._open.clear()
        self.history.append_many(ops)


def _child_main(conn: Connection, stop: Connection, spec: TestSpec, bootstrap: str,
                first_process: int, processes: ProcessIds, slot: int, t0: int) -> None:
    """A consumer child (:func:`.crashable.child_started`): a :class:`.group.GroupConsumer`
    journaling down ``conn`` (``t0``: the history's zero) until ``stop``'s other end closes
    (then it settles, as every member) or it is told to leave (then it closes at once)."""
    leave = threading.Event()
    done = child_started(stop, leave)
    try:
        GroupConsumer(spec, bootstrap, PipeJournal(conn, t0), first_process, processes,
                      slot=slot).run(done, leave)
    finally:
        conn.close()
