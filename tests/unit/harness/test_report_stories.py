"""Stories of anomaly examples: the checker's when it wrote one, else told from the history."""

from __future__ import annotations

from faultline.harness import report_measures as m
from faultline.harness.report_stories import Storyteller, cell, story_lines

S = 1_000_000_000


def _history() -> m.HistorySummary:
    h = m.HistorySummary()
    h.sends[17] = m.Send(0, 17, "q", 1, 1 * S, 1 * S + 5_000_000, "ok", 5)
    h.sends[18] = m.Send(0, 18, "q", 1, 2 * S, 3 * S, "fail", None, "NOT_ENOUGH_REPLICAS")
    h.drains[("q", 1)] = m.Drain({4: 3, 5: 21}, complete=True, high_watermark=6, log_start_offset=0)
    return h


FAULTS = [m.FaultWindow("kill", 2 * S, 9 * S, (2,)), m.FaultWindow("pause", 20 * S, None, (1,))]
OBS = {("q", 1): [{"time": 0, "leader": 2, "isr": [1, 2, 3], "hw": 4},
                  {"time": 2 * S, "leader": 1, "isr": [1, 3], "hw": 5}]}


def test_told_from_the_history() -> None:
    lines = Storyteller(_history(), FAULTS, OBS).lines(
        {"topic": "q", "partition": 1, "value": 17, "offset": 5, "time": 1 * S + 5_000_000})
    assert lines == [
        "1.000 s: process 0 sent value 17 to q/1",
        "1.005 s: acknowledged at offset 5 by leader n2 (ISR [1, 2, 3], HW 4)",
        "2.000 s: kill of node(s) 2, until 9.000 s",
        "20.000 s: pause of node(s) 1, never healed",
        "the drain shows offset 5 holds value 21; value 17 is nowhere in the partition",
    ]


def test_failed_send_and_unknown_value() -> None:
    t = Storyteller(_history(), [], {})
    assert t.lines({"partition": 1, "topic": "q", "value": 18})[1] == (
        "3.000 s: failed: NOT_ENOUGH_REPLICAS")
    unsent = t.lines({"partition": 1, "topic": "q", "value": 99, "offset": 9})
    assert unsent[0] == "no send in the history carried value 99"
    assert "past the high watermark 6" in unsent[-1]


def test_checker_story_kept_and_leader_added() -> None:
    ex = {"value": 17, "story": [{"time": 1 * S, "text": "sent"}, {"time": None, "text": "gone"}]}
    assert Storyteller(_history(), FAULTS, OBS).lines(ex) == [
        "1.000 s: sent", "gone", "observed at the ack: leader n2 (ISR [1, 2, 3], HW 4)"]
    assert Storyteller(_history(), FAULTS, {}).lines(ex) == ["1.000 s: sent", "gone"]


def test_cells_and_story_forms() -> None:
    assert cell("time", 1_500_000_000) == "1.500 s" and cell("invoke_time", 0) == "0.000 s"
    assert cell("values", [1, 2]) == "[1,2]" and cell("offset", None) == "null"
    assert len(cell("x", list(range(1000)))) == 240
    assert story_lines("plain") == ["plain"] and story_lines(None) == []
