"""The journal of a producer child: a batch with invokes returns only once the run has
journaled it (else a consumer of the run could read a value before its invoke is in the
history); completions alone do not wait."""

from __future__ import annotations

import multiprocessing
import threading

import orjson

from faultline.workloads.crashable import PipeJournal


def test_a_batch_with_invokes_waits_for_the_runs_answer_and_completions_do_not() -> None:
    run_end, child_end = multiprocessing.Pipe()
    journal = PipeJournal(child_end)
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
