"""A group consumer in a child process, as the run sees it: the op a killed member left
open ends ``info`` with the crash error, and every member keeps its slot (so, with static
membership, its ``group.instance.id``); a stopped member leaves at once and stays down until
its restart."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from faultline.errors import FaultlineError
from faultline.history import HistoryWriter, TimedOp, read_history
from faultline.spec import ConsumerSpec, TestSpec, WorkloadSpec
from faultline.workloads.clients import ProcessIds
from faultline.workloads.crashable import CrashableChild, PipeJournal, child_started
from faultline.workloads.group_crashable import CrashableConsumer, CrashableGroupWorkload
from faultline.workloads.outcomes import CRASH_ERROR

SPEC = replace(TestSpec(), workload=WorkloadSpec(name="group", producers=2, consumers=3),
               consumer=replace(ConsumerSpec(), mode="subscribe", static=True))


def test_a_killed_members_open_op_ends_info_and_its_completed_ones_are_counted(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        member = CrashableConsumer(SPEC, "x:9092", history, 3, ProcessIds(5), slot=1)
        commit = {"offsets": [["fl-queue", 0, 5, 0]]}
        ops = [[3, "invoke", "poll", None, None],
               [3, "ok", "poll", {"records": [["fl-queue", 0, 4, 17]]}, None],
               [3, "invoke", "commit", commit, None]]
        history.append_at([member._timed(history.now(), op) for op in ops])
        member._end_open()
    lines = [(o.process, o.type, o.f, o.value, o.error) for o in read_history(tmp_path / "history.jsonl")]
    assert lines[-1] == (3, "info", "commit", commit, CRASH_ERROR)
    assert member.polls == 1 and member.records == 1 and member.retired == 0


def test_a_member_holds_what_it_was_assigned_less_what_it_gave_up_until_it_is_retired(
        tmp_path: Path) -> None:
    """``held`` counts the live member's partitions by its journal: assigned, less revoked
    and lost; a retired member's replacement (a new process) starts with none; no child
    running, none."""
    def rebalance(process: int, f: str, *partitions: int) -> list[list[Any]]:
        value = {"partitions": [["fl-queue", p] for p in partitions], "member": "m", "generation": 1}
        return [[process, "invoke", f, value, None], [process, "ok", f, value, None]]

    with HistoryWriter(tmp_path / "history.jsonl") as history:
        member = CrashableConsumer(SPEC, "x:9092", history, 3, ProcessIds(5), slot=1)
        assert member.held() is None  # no child runs
        member._child = object()  # as if one ran
        seen = []
        for ops in (rebalance(3, "assign", 0, 1, 2), rebalance(3, "revoke", 1), rebalance(3, "lost", 0),
                    [[3, "invoke", "poll", None, None], [3, "info", "poll", None, "_FATAL"]],
                    rebalance(4, "assign", 1)):
            history.append_at([member._timed(history.now(), op) for op in ops])
            seen.append(member.held())
    assert seen == [3, 2, 1, 0, 1]


def test_each_consumer_keeps_its_slot(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        workload = CrashableGroupWorkload(SPEC, "x:9092", history)
    slots = [c.slot for c in workload.consumers if isinstance(c, CrashableConsumer)]
    assert slots == [0, 1, 2]
    assert [workload.child("consumers", i).name for i in range(3)] == [f"consumer {i}" for i in range(3)]


class Member(CrashableChild):
    """A child that journals, once stopped, whether it was told to leave or to settle."""

    def _target(self, conn: Connection, stop: Connection, first_process: int) -> tuple[Any, tuple[Any, ...]]:
        return _member_main, (conn, stop, first_process, time.monotonic_ns() - self.history.now())

    def _count(self, ns: int, op: list[Any]) -> TimedOp:
        process, type, f, value, error = op
        return ns, (process, type, f, value, error)

    def _end_open(self) -> None:
        raise AssertionError("nothing was killed")


def _member_main(conn: Connection, stop: Connection, first_process: int, t0: int) -> None:
    leave = threading.Event()
    done = child_started(stop, leave)
    done.wait(30)
    f = "leave" if leave.is_set() else "settle"
    PipeJournal(conn, t0).append_many([(first_process, "invoke", f, None, None),
                                       (first_process, "ok", f, None, None)])
    conn.close()


def test_a_stopped_member_leaves_at_once_and_stays_down_until_its_restart(tmp_path: Path) -> None:
    stop = threading.Event()
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        member = Member(history, 3, ProcessIds(5), "consumer 0")
        ran = threading.Thread(target=member.run, args=(stop,))
        ran.start()
        assert member._started.wait(30)
        left = member.stop()
        assert left["processes"] == [3] and left["pid"] > 0
        with pytest.raises(FaultlineError, match="consumer 0 is not running"):
            member.pause()
        assert member.restart() == {"processes": [5]}
        stop.set()
        ran.join(30)
        assert not ran.is_alive()
    ops = [(o.process, o.f) for o in read_history(tmp_path / "history.jsonl") if o.type == "ok"]
    assert ops == [(3, "leave"), (5, "settle")]
