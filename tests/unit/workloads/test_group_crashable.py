"""A group consumer in a child process, as the run sees it: the op a killed member left
open ends ``info`` with the crash error, and every member keeps its slot (so, with static
membership, its ``group.instance.id``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from faultline.history import HistoryWriter, read_history
from faultline.spec import ConsumerSpec, TestSpec, WorkloadSpec
from faultline.workloads.clients import ProcessIds
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


def test_each_consumer_keeps_its_slot(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        workload = CrashableGroupWorkload(SPEC, "x:9092", history)
    slots = [c.slot for c in workload.consumers if isinstance(c, CrashableConsumer)]
    assert slots == [0, 1, 2]
    assert [workload.child("consumers", i).name for i in range(3)] == [f"consumer {i}" for i in range(3)]
