"""The page's anomaly examples: every one results.json holds, within the page's 5 MB;
each judged a certain VIOLATION, certainly permitted, or not established where
results.json's ``unknown`` leaves it in doubt, as the headline and the partitions table
are; and the HW trace, where a deposed leader's stale answer is no dip."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from faultline.checkers.result import ANOMALIES, MAX_ANOMALY_EXAMPLES
from faultline.checkers.table import HistoryDigest, SendTable
from faultline.report import plots
from faultline.report.page import (
    RunData,
    anomaly_sections,
    availability,
    config_line,
    expectations,
    partition_rows,
    plot_data,
    render_report,
    verdict,
)
from faultline.report.stories import story_lines
from faultline.spec import KafkaSpec, TestSpec, WorkloadSpec
from tests.report_html import example_values, stories
from tests.unit.checkers.queue_hist import TOPIC, make_spec

EMPTY = HistoryDigest(SendTable.of([]), [], 0, 0, None, 0, False)
UNREADABLE = {"kind": "broker-state-unreadable", "why": "metadata.jsonl could not be read",
              "affects_verdict": True}


def _results(valid: Any, unknown: list[dict[str, Any]], examples: list[dict[str, Any]]) -> dict[str, Any]:
    """A results.json with ``examples`` of duplicate, forbidden on fl-queue/0."""
    return {"valid": valid, "anomaly_counts": {"duplicate": len(examples)},
            "anomalies": {"duplicate": examples}, "permitted": ["duplicate"], "violations": ["duplicate"],
            "unknown": unknown, "stats": {"send": {"ok": 2, "fail": 0, "info": 0}},
            "forbidden_reasons": {"duplicate": "idempotence on"},
            "permitted_reasons": {"duplicate": "idempotence off on fl-queue/1"}}


def _dup(value: int, partition: int, permitted: bool) -> dict[str, Any]:
    return {"topic": TOPIC, "partition": partition, "value": value, "offsets": [0, 1],
            "permitted": permitted, "explanation": f"value {value} stored twice"}


S = 1_000_000_000


def _lost(value: int, i: int) -> dict[str, Any]:
    """An example as the checker writes a lost write's: ~1 KB, its story and explanation
    telling much the same, the faults that followed shared with the other examples."""
    where = f"offset {i} holds nothing; value {value} is nowhere in the partition"
    kills = [{"time": k * S, "text": f"kill of node(s) {k % 3 + 1}, until {k}.{k}00s"} for k in range(2, 7)]
    story = [{"time": S + i, "text": f"process {i % 50} sent value {value} to {TOPIC}/{i % 3}"},
             {"time": S + i + 5, "text": f"acknowledged at offset {i}"},
             *kills,
             {"time": None, "text": "... and 3 more faults"},
             {"time": 9 * S, "text": f"the drain shows {where}"}]
    return {"topic": TOPIC, "partition": i % 3, "value": value, "offset": i, "time": S + i + 5,
            "invoke_time": S + i, "process": i % 50, "story": story, "permitted": False,
            "explanation": f"Value {value} was acknowledged at offset {i} at 1.000s but is not in "
                           f"{TOPIC}/{i % 3} after the run: the drain shows {where}. Not permitted "
                           "by the guarantees for this config and these faults."}


def test_every_example_of_every_type_is_on_a_page_under_5_mb(tmp_path: Path) -> None:
    """results.json holding the most examples it can (MAX_ANOMALY_EXAMPLES of every type, ~1 KB
    each): the page has a row for each, in order, with its story and explanation, and
    stays under 5 MB."""
    examples = {a: [_lost(100_000 * k + i, i) for i in range(MAX_ANOMALY_EXAMPLES)]
                for k, a in enumerate(ANOMALIES)}
    results = {"valid": False, "anomaly_counts": dict.fromkeys(ANOMALIES, MAX_ANOMALY_EXAMPLES),
               "anomalies": examples, "permitted": [], "violations": list(ANOMALIES), "unknown": [],
               "stats": {"send": {"ok": 10_000, "fail": 0, "info": 0}}}
    page = render_report(RunData(tmp_path, make_spec(partitions=3), results, EMPTY, False))
    assert len(page.encode()) < 5 * 1024 * 1024, len(page.encode())
    told = stories(page)
    for a, kept in examples.items():
        assert example_values(page, a) == [str(e["value"]) for e in kept], a
        assert told[a] == [[story_lines(e["story"]), e["explanation"]] for e in kept], a


def test_a_violation_judged_against_unreadable_broker_state_is_not_shown_as_certain(tmp_path: Path) -> None:
    """The checker saw a forbidden duplicate, but the broker state it was judged against
    could not be read (valid unknown): neither the type nor its example is a certain
    VIOLATION, and the example says its judgement is not established."""
    results = _results("unknown", [UNREADABLE], [_dup(10, 0, False)])
    run = RunData(tmp_path, make_spec(), results, EMPTY, False)
    [row] = [e for e in expectations(run) if e["name"] == "duplicate"]
    assert row["status"] == "doubted", row
    assert row["reason"] == ("not established (broker-state-unreadable): forbidden as judged: "
                             "idempotence on; permitted: idempotence off on fl-queue/1")
    [section] = anomaly_sections(run)
    [example] = section["rows"]
    assert not example["violation"]
    assert example["doubt"] == ("Judged forbidden, but whether it is permitted is not established "
                                "(broker-state-unreadable): see undecided above.")
    page = render_report(run)
    assert "VIOLATION" not in page[page.index('id="expected"'):]
    assert re.findall(r'<tr class="(example[^"]*)"', page) == ["example"]


def test_a_forbidden_example_beside_an_assumed_fault_elsewhere_stays_a_violation(tmp_path: Path) -> None:
    """A permission resting on an assumed fault of fl-queue/1 doubts only what it permits:
    the forbidden example on fl-queue/0 is a certain VIOLATION, the permitted one on
    fl-queue/1 is not established."""
    assumed = {"kind": "permitted-on-assumption", "why": "the leader fault is assumed", "topic": TOPIC,
               "partition": 1, "anomalies": ["duplicate"], "affects_verdict": True}
    run = RunData(tmp_path, make_spec(partitions=2),
                  _results(False, [assumed], [_dup(10, 0, False), _dup(11, 1, True)]), EMPTY, False)
    [row] = [e for e in expectations(run) if e["name"] == "duplicate"]
    assert row["status"] == "violation"
    [section] = anomaly_sections(run)
    forbidden, permitted = section["rows"]
    assert forbidden["violation"] and forbidden["doubt"] == ""
    assert not permitted["violation"]
    assert permitted["doubt"].startswith("Whether it is permitted is not established")
    page = render_report(run)
    assert re.findall(r'<tr class="(example[^"]*)"', page) == ["example violation", "example"]


def test_a_partitions_violation_judged_against_unreadable_broker_state_is_not_shown_as_certain(
        tmp_path: Path) -> None:
    """The partitions table agrees with the headline and the examples: a duplicate judged
    forbidden on fl-queue/0 against broker state that could not be read is not a red row
    saying "forbidden" as a certainty, but says its judgement is not established; beside
    an assumed fault elsewhere (a doubt on one partition) it stays a certain violation."""
    results = {**_results("unknown", [UNREADABLE], [_dup(10, 0, False)]), "partitions": [
        {"topic": TOPIC, "partition": 0, "anomaly_counts": {"duplicate": 1}, "violations": ["duplicate"],
         "complete": True}]}
    run = RunData(tmp_path, make_spec(), results, EMPTY, False)
    [row] = [p for p in partition_rows(run, availability(run)) if p["name"] == f"{TOPIC}/0"]
    assert not row["violation"]
    assert row["why"] == "not established (broker-state-unreadable): forbidden as judged: duplicate"
    page = render_report(run)
    table = page[page.index('id="partitions"'):page.index('id="anomalies"')]
    assert 'class="violation"' not in table and "not established (broker-state-unreadable)" in table
    assumed = {"kind": "permitted-on-assumption", "why": "the leader fault is assumed", "topic": TOPIC,
               "partition": 1, "anomalies": ["duplicate"], "affects_verdict": True}
    run = RunData(tmp_path, make_spec(partitions=2), {**results, "unknown": [assumed]}, EMPTY, False)
    [row] = [p for p in partition_rows(run, availability(run)) if p["name"] == f"{TOPIC}/0"]
    assert row["violation"] and row["why"] == "forbidden: duplicate"


def test_a_deposed_leaders_stale_hw_is_not_drawn_as_the_hw_going_back(tmp_path: Path) -> None:
    """A HW answered under leader epoch 4 after epoch 5 was seen is a deposed leader's
    stale answer (hw-monotonic holds): the HW line has a gap there, not a dip, and the
    answer is a separate mark naming both epochs. A file without hw_epoch draws as before."""
    samples = [{"time": t * S, "partition": 0, "leader": 1, "isr": [1], "hw": hw, "hw_epoch": e}
               for t, hw, e in ((1, 4, 4), (2, 6, 5), (3, 5, 4), (4, None, None), (5, 7, 5))]
    run = RunData(tmp_path, make_spec(), _results(True, [], []), EMPTY, False,
                  observations={(TOPIC, 0): samples})
    [trace] = plot_data(run, [], availability(run)).traces.values()
    assert trace.hw == [4, 6, None, None, 7]
    assert trace.stale == [plots.StaleHW(3.0, 5, 4, 5)]
    old = [{k: v for k, v in s.items() if k != "hw_epoch"} for s in samples]
    run = RunData(tmp_path, make_spec(), _results(True, [], []), EMPTY, False, observations={(TOPIC, 0): old})
    [trace] = plot_data(run, [], availability(run)).traces.values()
    assert trace.hw == [4, 6, 5, None, 7] and trace.stale == []


def test_writes_counted_lost_without_the_broker_state_are_not_a_certain_floor(tmp_path: Path) -> None:
    """With a replicas file that could not be read, the broker state might set aside
    writes the check counted lost (a drain that skipped what every replica holds):
    neither the headline nor the partitions table says "at least 3 lost" or a plain 3,
    but that the count is not established; an unfinished drain alone keeps the floor."""
    unread = {**UNREADABLE, "why": "replicas.jsonl could not be read"}
    results = {**_results("unknown", [unread], []), "anomaly_counts": {"lost-write": 3},
               "violations": ["lost-write"], "anomalies": {"lost-write": []}, "partitions": [
                   {"topic": TOPIC, "partition": 0, "anomaly_counts": {"lost-write": 3},
                    "violations": ["lost-write"], "complete": True}]}
    run = RunData(tmp_path, make_spec(), results, EMPTY, False)
    assert verdict(run).loss == ("3 acknowledged writes counted lost, "
                                 "not established (broker-state-unreadable)")
    [row] = [p for p in partition_rows(run, availability(run)) if p["name"] == f"{TOPIC}/0"]
    assert row["lost"] == "3, not established (broker-state-unreadable)"
    drain = {"kind": "incomplete-drain", "why": "no ok drain with last: true", "topic": TOPIC,
             "partition": 1, "affects_verdict": True}
    run = RunData(tmp_path, make_spec(), {**results, "valid": False, "unknown": [drain]}, EMPTY, False)
    assert verdict(run).loss == "at least 3 acknowledged writes lost"
    [row] = [p for p in partition_rows(run, availability(run)) if p["name"] == f"{TOPIC}/0"]
    assert row["lost"] == 3


def test_a_forbidden_example_on_the_partition_of_an_assumed_fault_stays_a_violation(tmp_path: Path) -> None:
    """An assumed fault only widens what its partition permits: an example it still
    forbids there is a certain VIOLATION, not one in doubt."""
    assumed = {"kind": "permitted-on-assumption", "why": "the leader fault is assumed", "topic": TOPIC,
               "partition": 1, "anomalies": ["duplicate"], "affects_verdict": True}
    run = RunData(tmp_path, make_spec(partitions=2), _results(False, [assumed], [_dup(10, 1, False)]),
                  EMPTY, False)
    [section] = anomaly_sections(run)
    [forbidden] = section["rows"]
    assert forbidden["violation"] and forbidden["doubt"] == ""


def test_an_example_not_judged_is_not_said_to_be_judged_forbidden(tmp_path: Path) -> None:
    """An example without ``permitted`` (not judged one by one) gets no line about its
    judgement, even where every judgement is in doubt."""
    unjudged = _dup(10, 0, False)
    del unjudged["permitted"]
    run = RunData(tmp_path, make_spec(), _results("unknown", [UNREADABLE], [unjudged]), EMPTY, False)
    [section] = anomaly_sections(run)
    [row] = section["rows"]
    assert row["doubt"] == "" and not row["violation"]


def test_the_config_line_of_a_txn_run_says_its_client_and_transaction_protocol() -> None:
    def line(client: str, version: int | None = None) -> str:
        return config_line(TestSpec(workload=WorkloadSpec(name="txn", client=client),
                                    kafka=KafkaSpec(transaction_version=version)))
    assert "java client, transaction protocol 2" in line("java")
    assert "java client, transaction protocol 1" in line("java", 1)
    assert "librdkafka client, transaction protocol 1" in line("librdkafka", 2)
    assert "transaction protocol" not in config_line(TestSpec())
