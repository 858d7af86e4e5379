"""Stories of anomaly examples: the checker's, with the leader at the ack from observations;
none for an example the checker did not tell."""

from __future__ import annotations

from pathlib import Path

import orjson

from faultline.checkers.table import HistoryDigest, Send, SendTable
from faultline.report.page import build_report
from faultline.report.stories import Storyteller, cell, story_lines
from tests.report_html import story_text
from tests.unit.checkers.queue_hist import TOPIC, H, make_spec

S = 1_000_000_000


def _history() -> HistoryDigest:
    return HistoryDigest(SendTable.of([
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
    assert cell("topic", "fl-queue") == "fl-queue" and cell("value", 17) == "17"
    assert cell("value", "17") == '"17"' and cell("value", "é") == '"é"'  # read, not sent
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


def test_the_report_says_who_broke_a_duplicate(tmp_path: Path) -> None:
    """A stored run whose drain holds value 10 twice, the second copy written under a
    later producer epoch: the report names the cause and its culprit, and the story
    shows each copy's producer id, epoch and sequence."""
    h = H()
    h.send(0, 10, offset=0)
    h.drain([(0, 10), (1, 10)])
    (tmp_path / "test.json").write_bytes(orjson.dumps(make_spec().to_json()))
    (tmp_path / "history.jsonl").write_bytes(b"".join(orjson.dumps(o.to_dict()) + b"\n" for o in h.ops))
    batches = [[0, 0, 0, 11, 1000, 0, 7, 7], [1, 1, 0, 22, 1000, 1, 0, 0]]
    (tmp_path / "replicas.jsonl").write_bytes(b"".join(orjson.dumps(
        {"topic": TOPIC, "partition": 0, "node": n, "log_start_offset": 0, "log_end_offset": 2,
         "hw_checkpoint": 2, "batches": batches}) + b"\n" for n in (1, 2, 3)))
    page = build_report(tmp_path).read_text(encoding="utf-8")
    assert "client-epoch-bump ×1 (client)" in page
    assert "producer id 1000, epoch 1, sequence 0" in story_text(page)


def test_a_deposed_leaders_stale_hw_is_told_as_such() -> None:
    """The HW at the ack came from a broker under leader epoch 3 after epoch 5 was seen:
    the story says it is a deposed leader's stale answer, not the partition's HW."""
    obs = {("q", 1): [{"time": 0, "leader": 2, "isr": [1, 2, 3], "hw": 6, "hw_epoch": 5},
                      {"time": S, "leader": 2, "isr": [1, 2, 3], "hw": 4, "hw_epoch": 3}]}
    assert Storyteller(_history(), obs).leader_at(("q", 1), 1 * S + 5_000_000) == (
        "leader n2 (ISR [1, 2, 3], HW 4 answered under leader epoch 3, older than epoch 5 seen before: "
        "a deposed leader's stale answer)")
    assert Storyteller(_history(), OBS).leader_at(("q", 1), 3 * S) == "leader n1 (ISR [1, 3], HW 5)"
