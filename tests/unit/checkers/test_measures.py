"""Fault windows from nemesis ops (the checker's, which the report draws)."""

from __future__ import annotations

from typing import Any

from faultline.checkers.faults_seen import nemesis_actions
from faultline.checkers.measures import fault_windows
from faultline.history import Op

S = 1_000_000_000


def nem(index: int, t: float, f: str, value: Any) -> Op:
    return Op(index, int(t * S), "nemesis", "info", f, value)


def test_held_fault_lasts_until_its_heal_completes() -> None:
    ops = [nem(0, 1, "kill", {"nodes": [2]}), nem(1, 1.1, "kill", {"nodes": [2], "result": "killed"}),
           nem(2, 2, "kill", {"nodes": [3]}), nem(3, 2.1, "kill", {"nodes": [3]}),
           nem(4, 5, "start", {"nodes": [2]}), nem(5, 5.4, "start", {"nodes": [2]})]
    windows = fault_windows(nemesis_actions(ops))
    assert [(w["f"], w["start"], w["end"], w["nodes"]) for w in windows] == [
        ("kill", 1 * S, int(5.4 * S), [2]), ("kill", 2 * S, None, [3])]
    assert "killed" in windows[0]["detail"]


def test_partition_heal_and_instant_faults() -> None:
    ops = [nem(0, 1, "partition", {"grudge": {"1": [2, 3], "2": [1], "3": [1]}}), nem(1, 1, "partition", {}),
           nem(2, 3, "wipe", {"nodes": [1]}), nem(3, 4, "wipe", {"nodes": [1]}),
           nem(4, 6, "heal", {}), nem(5, 6.5, "heal", {})]
    windows = fault_windows(nemesis_actions(ops))
    assert [(w["f"], w["start"] / S, None if w["end"] is None else w["end"] / S) for w in windows] == [
        ("partition", 1, 6.5), ("wipe", 3, 4)]
    assert windows[0]["nodes"] == [1, 2, 3] and "n1 drops 2,3" in windows[0]["detail"]


def test_a_skipped_fault_has_no_window() -> None:
    """Found by the nemesis review: a fault the nemesis skipped (no target; its node was
    down already) did nothing, yet drew a window, and one never healed when no heal
    followed (a plan that failed), so every later unavailability was laid at its door."""
    ops = [nem(0, 1, "kill", {"kind": "kill"}),
           nem(1, 1.1, "kill", {"kind": "kill", "nodes": [], "result": "skipped"}),
           nem(2, 2, "pause", {"nodes": [3]}),
           nem(3, 2.1, "pause", {"nodes": [], "result": "skipped", "why": "node 3 was down: nothing done"}),
           nem(4, 5, "resume", {"nodes": [3]}), nem(5, 5.1, "resume", {"nodes": [3], "result": "resumed"})]
    assert fault_windows(nemesis_actions(ops)) == []


def test_a_release_ends_the_hold_but_not_the_isolation_still_in_effect() -> None:
    """Found by the nemesis review: a targeted ``release`` (journaled as a ``heal`` with
    the grudges still in effect after it) ended every partition window naming a released
    node, the isolation it left in place too, so the unavailability it went on causing
    until the final heal was laid at no fault's door."""
    isolated = {"1": [3], "2": [3], "3": [1, 2]}
    held = {"1": [2], "2": [1]}
    ops = [nem(0, 1, "partition", {"kind": "isolate", "grudge": isolated, "replication": {},
                                   "nodes": [1, 2, 3]}), nem(1, 1.1, "partition", {"result": "cut"}),
           nem(2, 2, "partition", {"kind": "hold", "grudge": isolated, "replication": held, "nodes": [1, 2]}),
           nem(3, 2.1, "partition", {"result": "cut"}),
           nem(4, 3, "heal", {"kind": "release", "grudge": isolated, "replication": {}, "nodes": [1]}),
           nem(5, 3.1, "heal", {"result": "network partly healed"}),
           nem(6, 6, "heal", {"kind": "isolate", "nodes": [1, 2, 3]}),
           nem(7, 6.1, "heal", {"result": "network healed"})]
    windows = fault_windows(nemesis_actions(ops))
    assert [(w["f"], w["start"] / S, w["end"] / S, w["nodes"]) for w in windows] == [
        ("partition", 1, 3.1, [1, 2, 3]), ("partition", 2, 3.1, [1, 2]), ("partition", 3.1, 6.1, [1, 2, 3])]
    assert "n3 drops 1,2" in windows[-1]["detail"]
