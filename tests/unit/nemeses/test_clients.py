"""The clients nemesis against fake clients: what it crashes, what it journals, what its
restart and teardown start again; and which workload a test with client crashes runs."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

from faultline.errors import FaultlineError, NemesisError, SpecError
from faultline.history import HistoryWriter, Op, read_history
from faultline.nemeses.clients import ClientsNemesis
from faultline.nemeses.package import NemesisPackage
from faultline.nemeses.schedule import ScheduledFault, build_schedule
from faultline.nemeses.scripted import ScriptedPackage
from faultline.spec import ConsumerSpec, NemesisSpec, TestSpec, WorkloadSpec
from faultline.workloads import workload_for
from faultline.workloads.crashable import CrashableQueueWorkload
from faultline.workloads.java_client import JavaQueueWorkload
from faultline.workloads.java_crashable import CrashableJavaQueueWorkload
from faultline.workloads.queue import QueueWorkload
from faultline.workloads.txn import CrashableTxnWorkload
from tests.unit.nemeses.test_package import FakeCluster


class FakeClients:
    clients = 3

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.down: set[int] = set()
        self.next = 10

    def crash_client(self, index: int) -> dict[str, Any]:
        if index in self.down:
            raise FaultlineError(f"producer {index} is not running")
        self.down.add(index)
        self.calls.append(("crash", index))
        return {"processes": [index], "pid": 100 + index, "sends": 7}

    def restart_client(self, index: int) -> dict[str, Any]:
        self.calls.append(("restart", index))
        self.down.discard(index)
        self.next += 1
        return {"processes": [self.next]}


def op(f: str, value: dict[str, Any]) -> Op:
    return Op(0, 0, "nemesis", "info", f, value, None)


def test_a_crash_kills_the_client_its_pick_names_and_the_restart_replaces_it() -> None:
    clients, nemesis = FakeClients(), ClientsNemesis()
    nemesis.bind(clients)
    plan = nemesis.plan(ScheduledFault(1.0, "clients", "crash", 5.0, pick=4), busy=())
    assert plan == {"clients": [1]}  # 4 % 3
    done = nemesis.invoke(op("crash-client", plan)).value
    assert done["processes"] == [1] and done["pid"] == 101 and done["sends"] == 7
    assert "killed producer 1" in done["result"]
    healed = nemesis.invoke(op("restart-client", {"kind": "crash"})).value
    assert healed["clients"] == [1] and healed["processes"] == [11]
    nemesis.teardown()  # nothing left crashed: nothing restarted
    assert clients.calls == [("crash", 1), ("restart", 1)]


def test_teardown_restarts_what_is_still_crashed_and_errors_are_nemesis_errors() -> None:
    clients, nemesis = FakeClients(), ClientsNemesis()
    nemesis.bind(clients)
    nemesis.invoke(op("crash-client", {"clients": [2]}))
    with pytest.raises(NemesisError, match="producer 2 is not running"):
        nemesis.invoke(op("crash-client", {"clients": [2]}))
    nemesis.teardown()
    assert clients.calls == [("crash", 2), ("restart", 2)]
    with pytest.raises(NemesisError, match="cannot 'kill'"):
        nemesis.invoke(op("kill", {}))


def test_without_clients_bound_a_crash_is_a_nemesis_error() -> None:
    nemesis = ClientsNemesis()
    nemesis.teardown()  # nothing bound, nothing to heal
    with pytest.raises(NemesisError, match="no crashable clients"):
        nemesis.plan(ScheduledFault(1.0, "clients", "crash", 5.0, pick=0), busy=())


def test_the_package_hands_the_clients_to_its_clients_nemesis() -> None:
    spec = TestSpec(nemesis=NemesisSpec(faults=("clients", "kill")))
    schedule = build_schedule(spec.nemesis, 0, 60, 3)
    assert {s.family for s in schedule} == {"clients", "kill"}
    assert {s.kind for s in schedule if s.family == "clients"} == {"crash"}
    package = NemesisPackage(object(), schedule, {"clients": ClientsNemesis()})  # type: ignore[arg-type]
    clients = FakeClients()
    package.bind_clients(clients)
    nemesis = package.nemeses["clients"]
    assert isinstance(nemesis, ClientsNemesis) and nemesis.workload is clients


def test_a_queue_test_with_client_crashes_runs_crashable_producers_and_no_other_can() -> None:
    crashes = NemesisSpec(faults=("clients",))
    assert workload_for(TestSpec()) is QueueWorkload
    assert workload_for(TestSpec(nemesis=crashes)) is CrashableQueueWorkload
    java = WorkloadSpec(client="java")
    assert workload_for(TestSpec(workload=java)) is JavaQueueWorkload
    assert workload_for(TestSpec(nemesis=crashes, workload=java)) is CrashableJavaQueueWorkload
    targeted = NemesisSpec(schedule=("crash client 0",))
    assert workload_for(TestSpec(nemesis=targeted, workload=java)) is CrashableJavaQueueWorkload
    txn = dataclasses.replace(TestSpec(), nemesis=crashes, workload=WorkloadSpec(name="txn"))
    assert workload_for(txn) is CrashableTxnWorkload
    group = dataclasses.replace(TestSpec(), nemesis=crashes, workload=WorkloadSpec(name="group"),
                                consumer=ConsumerSpec(mode="subscribe"))
    with pytest.raises(SpecError, match="not the group workload"):
        workload_for(group)


def test_targeted_client_crashes_are_journaled_per_producer_and_restarted_at_the_heal(
        tmp_path: Path) -> None:
    schedule = ("crash client 1", "restart client 1", "crash clients")
    spec = TestSpec(nemesis=NemesisSpec(schedule=schedule), workload=WorkloadSpec(producers=3))
    assert spec.nemesis.crashes_clients
    nemesis = ScriptedPackage.from_spec(spec, FakeCluster(spec, tmp_path))  # type: ignore[arg-type]
    clients = FakeClients()
    nemesis.bind_clients(clients)
    nemesis.setup()
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        nemesis.run(time.monotonic() + 5, history)
        assert nemesis.ended is None and nemesis.in_effect() == ["crash-client: producer(s) 0,1,2"]
        nemesis.heal_all(history)
    done = [(op.f, op.value["clients"]) for op in read_history(tmp_path / "history.jsonl")
            if "result" in op.value]
    assert done == [("crash-client", [1]), ("restart-client", [1]), ("crash-client", [0]),
                    ("crash-client", [1]), ("crash-client", [2]), ("restart-client", [0, 1, 2])]
    assert clients.calls == [("crash", 1), ("restart", 1), ("crash", 0), ("crash", 1), ("crash", 2),
                             ("restart", 0), ("restart", 1), ("restart", 2)]
    assert nemesis.active == []


@pytest.mark.parametrize(("lines", "message"), [
    (["crash client x"], "expected a producer index"),
    (["restart client 1 2"], "restart takes 'client N'"),
    (["crash client 2"], "the producers are 0 to 1"),
])
def test_bad_client_steps_are_one_line(lines: list[str], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        TestSpec(nemesis=NemesisSpec(schedule=tuple(lines)))
