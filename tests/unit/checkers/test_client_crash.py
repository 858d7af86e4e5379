"""The queue checker and client crashes: a crash excuses no loss (or duplicate) of an
acknowledged write; the crashed client's open sends, ended ``info``, may be in the log
or not, a violation neither way."""

from __future__ import annotations

from faultline.checkers.queue import check
from faultline.checkers.result import Result
from faultline.spec import TestSpec
from faultline.workloads.outcomes import CRASH_ERROR
from tests.unit.checkers.queue_hist import TOPIC, H, make_spec


def crashed(h: H) -> None:
    """Producer 0 crashes with sends 12 and 13 open; its replacement is process 2."""
    h.invoke(0, 12)
    h.invoke(0, 13)
    h.op("nemesis", "info", "crash-client", {"kind": "crash", "clients": [0]})
    h.done(0, 12, "info", error=CRASH_ERROR)
    h.done(0, 13, "info", error=CRASH_ERROR)
    h.op("nemesis", "info", "crash-client", {"kind": "crash", "clients": [0], "processes": [0],
                                              "pid": 4711, "sends": 2, "result": "killed"})
    h.op("nemesis", "info", "restart-client", {"kind": "crash"})
    h.op("nemesis", "info", "restart-client", {"kind": "crash", "clients": [0], "processes": [2],
                                                "result": "restarted"})


def run(records: list[tuple[int, int]], spec: TestSpec | None = None, crash: bool = True) -> Result:
    h = H()
    h.send(0, 10, offset=0)
    h.send(0, 11, offset=1)
    if crash:
        crashed(h)
    h.send(2, 14, offset=max(o for o, v in records if v == 14))
    h.drain(records)
    return check(spec or make_spec(), h.ops)


def test_the_crashed_clients_open_sends_may_be_written_or_not() -> None:
    for records in ([(0, 10), (1, 11), (2, 14)], [(0, 10), (1, 11), (2, 12), (3, 14)],
                    [(0, 10), (1, 11), (2, 13), (3, 12), (4, 14)]):
        r = run(records)
        assert r.valid is True, (records, r.violations)
        assert r.stats["send"]["info"] == 2


def test_an_acknowledged_write_lost_with_only_a_client_crash_is_a_violation() -> None:
    # acks=1: a leader fault would permit the loss (test_queue.py); a client crash does not
    for spec in (make_spec(), make_spec(acks="1")):
        r = run([(0, 10), (1, 14)], spec)
        assert r.valid is False and "lost-write" in r.violations
        [ex] = r.anomalies["lost-write"]
        assert (ex["topic"], ex["value"], ex["permitted"]) == (TOPIC, 11, False)


def test_an_acknowledged_write_duplicated_after_a_client_crash_is_a_violation() -> None:
    r = run([(0, 10), (1, 11), (2, 11), (3, 14)])
    assert r.valid is False and "duplicate" in r.violations
    assert run([(0, 10), (1, 11), (2, 14)], crash=False).valid is True
