"""The journal of a producer child: a batch with invokes returns only once the run has
journaled it (else a consumer of the run could read a value before its invoke is in the
history); completions alone do not wait."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path

import orjson

from faultline.history import HistoryWriter, read_history
from faultline.spec import TestSpec
from faultline.workloads.clients import ProcessIds, Values
from faultline.workloads.crashable import CrashableProducer, CrashableQueueWorkload, PipeJournal
from faultline.workloads.outcomes import CRASH_ERROR
from faultline.workloads.txn import txn_producer


def test_a_batch_with_invokes_waits_for_the_runs_answer_and_completions_do_not() -> None:
    run_end, child_end = multiprocessing.Pipe()
    journal = PipeJournal(child_end, 0)
    journal.append(0, "ok", "send", {"topic": "t", "partition": 0, "value": 1, "offset": 0})
    _, [done] = orjson.loads(run_end.recv_bytes())  # sent, no answer needed
    assert done[:3] == [0, "ok", "send"]

    returned = threading.Event()
    invoke = (0, "invoke", "send", {"topic": "t", "partition": 0, "value": 2}, None)
    t = threading.Thread(target=lambda: (journal.append_many([invoke]), returned.set()))
    t.start()
    ns, ops = orjson.loads(run_end.recv_bytes())
    assert ops == [list(invoke)] and ns > 0
    assert not returned.wait(0.3), "the invoke's batch returned before the run journaled it"
    run_end.send_bytes(b"")
    assert returned.wait(5)
    t.join()


def test_a_crash_ends_each_open_transaction_info_and_one_meant_to_commit_may_have_asked_since_it_began(
        tmp_path: Path) -> None:
    history = HistoryWriter(tmp_path / "history.jsonl")
    producer = CrashableProducer(TestSpec(), "bootstrap", history, 0, ProcessIds(2), Values(), rate=0.0,
                                 index=0, client_log=None, make=txn_producer)
    sends = [{"partition": 0, "value": 1}, {"partition": 1, "value": 2}]
    begun = time.monotonic_ns()
    invokes = [producer._count(begun, [p, "invoke", "txn", {"topic": "fl-queue", "abort": abort,
                                                            "sends": sends}, None])
               for p, abort in ((0, False), (5, True))]
    history.append_at(invokes)
    producer._end_open()
    history.close()
    ops = list(read_history(tmp_path / "history.jsonl"))
    [commit, abort] = [op for op in ops if op.type == "info"]
    assert [(op.process, op.f, op.error) for op in (commit, abort)] == [(0, "txn", CRASH_ERROR),
                                                                        (5, "txn", CRASH_ERROR)]
    # it may have asked to commit any time from its invoke (as the history's clock read then) to the crash
    assert ops[0].time <= commit.value["committing"] <= commit.time and "committing" not in abort.value
    assert producer.counts.info == 2


def test_a_producer_counts_the_transactions_it_committed_not_those_aborted_or_unknown(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        producer = CrashableProducer(TestSpec(), "bootstrap", history, 0, ProcessIds(2), Values(), rate=0.0,
                                     index=0, client_log=None, make=txn_producer)
        value = {"topic": "fl-queue", "abort": False, "sends": []}
        for type in ("invoke", "ok", "invoke", "fail", "invoke", "info", "invoke", "ok"):
            producer._count(time.monotonic_ns(), [0, type, "txn", value, None])
    assert producer.committed() == 2


def test_start_returns_once_each_child_has_journaled_an_op(tmp_path: Path) -> None:
    """A child takes a second or more to start, and the run's time limit counts from its
    first op, not from the spawn: its invokes need no broker, so each comes at once."""
    spec = TestSpec.from_mapping({"workload": {"producers": 2, "consumers": 0},
                                  "nemesis": {"faults": ["clients"]}})
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        w = CrashableQueueWorkload(spec, "127.0.0.1:1", history)
        w.start()
        try:
            seen = {op.process for op in read_history(tmp_path / "history.jsonl")}
        finally:
            for index in range(w.clients):  # no broker: sends would wait out their timeout
                w.crash_client(index)
            w.stop()
    assert seen == {0, 1}
