"""Stories of anomaly examples: the checker's, with the leader at the ack from observations;
none for an example the checker did not tell."""

from __future__ import annotations

from faultline.checkers.table import HistoryTable, Send, SendTable
from faultline.report.stories import Storyteller, cell, story_lines

S = 1_000_000_000


def _history() -> HistoryTable:
    return HistoryTable(SendTable.of([
        Send(0, 17, "q", 1, 1 * S, 1 * S + 5_000_000, "ok", 5),
        Send(0, 18, "q", 1, 2 * S, 3 * S, "fail", None, "NOT_ENOUGH_REPLICAS")]), [], 0, 0, None, 0, False)


OBS = {("q", 1): [{"time": 0, "leader": 2, "isr": [1, 2, 3], "hw": 4},
                  {"time": 2 * S, "leader": 1, "isr": [1, 3], "hw": 5}]}


def test_no_story_is_made_up_for_an_example_without_one() -> None:
    t = Storyteller(_history(), OBS)
    assert t.lines({"topic": "q", "partition": 1, "value": 17, "offset": 5}) == []
    assert t.lines({"partition": 1, "topic": "q", "value": 18, "story": ""}) == []


def test_checker_story_kept_and_leader_added() -> None:
    ex = {"value": 17, "story": [{"time": 1 * S, "text": "sent"}, {"time": None, "text": "gone"}]}
    assert Storyteller(_history(), OBS).lines(ex) == [
        "1.000 s: sent", "gone", "observed at the ack: leader n2 (ISR [1, 2, 3], HW 4)"]
    assert Storyteller(_history(), {}).lines(ex) == ["1.000 s: sent", "gone"]


def test_cells_and_story_forms() -> None:
    assert cell("time", 1_500_000_000) == "1.500 s" and cell("invoke_time", 0) == "0.000 s"
    assert cell("values", [1, 2]) == "[1,2]" and cell("offset", None) == "null"
    assert len(cell("x", list(range(1000)))) == 240
    assert story_lines("plain") == ["plain"] and story_lines(None) == []


CHANGES = [{"time": 0, "partition": 1, "from": None, "to": 2, "epoch": 4, "kind": "isr"},
           {"time": 3 * S, "partition": 1, "from": 2, "to": None, "epoch": 5, "kind": "offline",
            "isr_before": [1, 2, 3], "elr_before": []},
           {"time": 4 * S, "partition": 1, "from": None, "to": 3, "epoch": 6, "kind": "elr",
            "isr_before": [], "elr_before": [3]}]


def test_metadata_log_adds_the_leader_at_the_ack_and_the_next_election() -> None:
    ex = {"value": 17, "story": [{"time": 1 * S, "text": "acknowledged at offset 5"},
                                 {"time": None, "text": "gone"}]}
    assert Storyteller(_history(), {}, CHANGES).lines(ex) == [
        "1.000 s: acknowledged at offset 5",
        "metadata log: n2 led (epoch 4) since 0.000 s",
        "4.000 s: n3 was elected from the ELR (epoch 6; ISR before [], ELR [3])",
        "gone"]
