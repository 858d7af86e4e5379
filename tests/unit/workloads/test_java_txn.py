"""The txn workload with the Java client: its program's settings, and its printed
transactions as ``txn`` ops, counted as transactions."""

from __future__ import annotations

import dataclasses
import io
import time
from pathlib import Path

import pytest

from faultline.history import HistoryWriter, read_history
from faultline.spec import NemesisSpec, TestSpec, TransactionSpec, WorkloadSpec
from faultline.workloads import workload_for
from faultline.workloads.java_client import JavaProgram
from faultline.workloads.java_txn import CrashableJavaTxnWorkload, JavaTxnWorkload
from faultline.workloads.outcomes import CRASH_ERROR
from tests.unit.workloads.test_java_client import Trickle, printed_line
from tests.unit.workloads.test_java_crashable import fake_jvms

SPEC = dataclasses.replace(TestSpec(name="jt"), workload=WorkloadSpec(name="txn", client="java", producers=2),
                           transactions=TransactionSpec(sends=2, abort_probability=0.25))
SENDS = [{"partition": 0, "value": 4}, {"partition": 1, "value": 5}]
DONE = [{**SENDS[0], "offset": 7}, {**SENDS[1], "offset": 2}]


def test_the_txn_workload_with_the_java_client_is_java_txn_and_crashable_with_client_crashes() -> None:
    assert workload_for(SPEC) is JavaTxnWorkload
    crashes = dataclasses.replace(SPEC, nemesis=NemesisSpec(faults=("clients",)))
    assert workload_for(crashes) is CrashableJavaTxnWorkload


def test_the_program_is_told_the_transactions_settings(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        args = dict(a.split("=", 1) for a in JavaTxnWorkload(SPEC, "x:9092", history)._args())
    assert args["workload"] == "txn" and args["transactional_ids"] == "faultline-jt-t0,faultline-jt-t1"
    assert (args["sends"], args["abort_probability"], args["seed"]) == ("2", "0.25", str(SPEC.seed))
    assert args["transaction_timeout_ms"] == str(max(SPEC.producer.delivery_timeout_ms, 10_000))
    assert args["isolation_level"] == SPEC.consumer.isolation_level


def test_the_program_is_told_how_many_records_a_transaction_reads_and_in_which_group(tmp_path: Path) -> None:
    rpw = dataclasses.replace(SPEC, transactions=TransactionSpec(sends=2, reads=3, gap_ms=150))
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        args = dict(a.split("=", 1) for a in JavaTxnWorkload(rpw, "x:9092", history)._args())
    assert (args["reads"], args["rpw_group"]) == ("3", rpw.rpw_group_id) == ("3", "faultline-jt-rpw")
    assert args["gap_ms"] == "150"


def test_printed_transactions_become_txn_ops_counted_as_transactions(tmp_path: Path) -> None:
    commit, abort = {"topic": SPEC.topic.name, "abort": False}, {"topic": SPEC.topic.name, "abort": True}
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = JavaTxnWorkload(SPEC, "x:9092", history)
        asked = time.monotonic_ns()  # printed on the program's clock, journaled on the history's
        printed = [
            {"process": 0, "type": "invoke", "f": "txn", "value": {**commit, "sends": SENDS}},
            {"process": 0, "type": "ok", "f": "txn", "value": {**commit, "sends": DONE, "committing": asked}},
            {"process": 1, "type": "invoke", "f": "txn", "value": {**abort, "sends": SENDS}},
            {"process": 1, "type": "fail", "f": "txn", "value": {**abort, "sends": DONE}},
            {"process": 0, "type": "invoke", "f": "txn", "value": {**commit, "sends": SENDS}},
            {"process": 0, "type": "info", "f": "txn", "value": {**commit, "sends": SENDS},
             "error": "_TimeoutException"},
            {"f": "exit", "next_process": 5},
        ]
        w._journal(io.BufferedReader(Trickle(b"".join(map(printed_line, printed)))), w._programs[0])
    ops = list(read_history(tmp_path / "history.jsonl"))
    printed[1]["value"]["committing"] = history.clock(asked)
    assert [(o.process, o.type, o.f, o.value, o.error) for o in ops] == [
        (p["process"], p["type"], p["f"], p["value"], p.get("error")) for p in printed[:-1]]
    assert 0 <= ops[1].value["committing"] <= ops[1].time
    s = w.stats()
    assert (s.invoked, s.ok, s.fail, s.info, s.retired) == (3, 1, 1, 1, 1)
    assert w.processes.take() == 5


def test_a_crash_ends_the_killed_jvms_open_transaction_info_committing_since_its_invoke(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each "JVM" is a shell that prints what a transactional producer JVM would (one
    transaction ended, one left open, acknowledged by a ``+`` each) and waits."""
    spec = dataclasses.replace(SPEC, nemesis=NemesisSpec(faults=("clients",)))
    commit, abort = {"topic": SPEC.topic.name, "abort": False}, {"topic": SPEC.topic.name, "abort": True}
    told: list[bytes] = []
    monkeypatch.setattr(JavaProgram, "tell", lambda _, data: told.append(data))
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = CrashableJavaTxnWorkload(spec, "x:9092", history)
        printed = b"".join(map(printed_line, [
            {"process": 0, "type": "invoke", "f": "txn", "value": {**abort, "sends": SENDS}},
            {"process": 0, "type": "fail", "f": "txn", "value": {**abort, "sends": DONE}},
            {"process": 0, "type": "invoke", "f": "txn", "value": {**commit, "sends": SENDS}}]))
        fake_jvms(monkeypatch, w, printed)
        w.start()
        try:
            deadline = time.monotonic() + 30
            while w.stats().invoked < 2:
                assert time.monotonic() < deadline, "the transactions were never journaled"
                time.sleep(0.01)
            crash = w.crash_client(0)
        finally:
            w.stop(timeout=0.5)
    ops = [o for o in read_history(tmp_path / "history.jsonl") if o.f == "txn"]
    assert [(o.type, o.value["abort"], o.error) for o in ops] == [
        ("invoke", True, None), ("fail", True, None), ("invoke", False, None), ("info", False, CRASH_ERROR)]
    assert ops[-1].value == {**commit, "sends": SENDS, "committing": ops[-2].time}
    assert crash["sends"] == 1 and b"".join(told).count(b"+") == 2
    s = w.stats()
    assert (s.invoked, s.fail, s.info) == (2, 1, 1)
