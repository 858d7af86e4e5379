"""A consumer crashed or paused by a random schedule is judged exactly as one a targeted
schedule crashed or paused: the checkers read the ops, which the two journal alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faultline.checkers.results_file import check_run
from tests.unit.checkers.test_groups import G, group_spec, stored, taken_over

#: A targeted schedule's consumer faults: (f, value) of each op, invoke then completion.
TARGETED = [
    ("crash-client", {"step": "crash consumer 1", "kind": "crash", "consumers": [1]}),
    ("crash-client", {"step": "crash consumer 1", "kind": "crash", "consumers": [1], "processes": [2],
                      "pid": 4712, "result": "killed consumer 1 (pid 4712, processes [2])"}),
    ("restart-client", {"step": "restart consumer 1", "kind": "crash", "consumers": [1]}),
    ("restart-client", {"step": "restart consumer 1", "kind": "crash", "consumers": [1], "processes": [5],
                        "result": "consumer 1 restarted as process [5]"}),
    ("pause-client", {"step": "pause consumer 0 for 7 s", "kind": "pause", "consumers": [0], "for_s": 7.0}),
    ("pause-client", {"step": "pause consumer 0 for 7 s", "kind": "pause", "consumers": [0], "for_s": 7.0,
                      "processes": [1], "pid": 4711, "result": "paused consumer 0 (pid 4711)"}),
    ("resume-client", {"step": "pause consumer 0 for 7 s", "kind": "pause", "consumers": [0]}),
    ("resume-client", {"step": "pause consumer 0 for 7 s", "kind": "pause", "consumers": [0],
                       "result": "consumer 0 resumed"}),
]


def drawn(f: str, value: dict[str, Any]) -> dict[str, Any]:
    """The value a random schedule journals for the same op: no ``step`` nor ``for_s``; a
    fault's ``hold_s``."""
    out = {k: v for k, v in value.items() if k not in ("step", "for_s")}
    return {**out, "hold_s": 7.0} if f in ("crash-client", "pause-client") else out


def with_faults(random: bool) -> G:
    """:func:`~tests.unit.checkers.test_groups.taken_over` (a commit going backwards) with
    the consumer faults of :data:`TARGETED` once the first member is revoked, journaled as a
    random or a targeted schedule does."""
    h = G()
    for o in taken_over(fault=False).ops:
        h.op(o["process"], o["type"], o["f"], o["value"], o.get("error"))
        if o["f"] == "revoke" and o["type"] == "ok":
            for f, value in TARGETED:
                h.op("nemesis", "info", f, drawn(f, value) if random else value)
    return h


def test_a_random_consumer_crash_and_pause_are_judged_as_targeted_ones(tmp_path: Path) -> None:
    judged = [check_run(stored(tmp_path / str(random), group_spec(), with_faults(random))).to_json()
              for random in (False, True)]
    for results in judged:  # what differs: the file, and the fault windows' details (the ops' text)
        del results["history"]
        for window in results["measures"]["faults"]:
            del window["detail"]
    assert judged[0] == judged[1]
    results = judged[1]
    assert results["violations"] == ["commit-backwards"] and "clients" in results["faults_seen"]
    assert [(w["f"], w["kind"], w["end"] is not None) for w in results["measures"]["faults"]] == [
        ("crash-client", "clients", True), ("pause-client", "clients", True)]
