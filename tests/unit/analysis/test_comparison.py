"""What the nightly comparison shows of each cell (faultline/analysis/comparison.py), and
the anomalies table's violation column (faultline/analysis/tables.py): found by a review,
each test fails against the code before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faultline.analysis.comparison import config, grids, names, price_plot, render, status, trend
from faultline.analysis.junit import outcome
from faultline.analysis.sweepdir import Cell
from faultline.analysis.tables import SendFigures, anomaly_rows, run_row
from faultline.checkers.queue import check
from faultline.checkers.result import MAX_ANOMALY_EXAMPLES
from tests.unit.checkers.queue_hist import H, make_spec


def cell_row(**kw: Any) -> dict[str, Any]:
    """A cells row (docs/analysis.md), clean unless ``kw`` says otherwise."""
    base = {"sweep": "n-1", "night": "2026-11-23", "created": "2026-11-23T02:00:00Z",
            "cell": "producer.acks=1", "producer_acks": "1", "topic_min_insync_replicas": 1,
            "nemesis_faults": "kill", "runs_total": 1, "runs": 1, "runs_failed": 0,
            "runs_lost": 0, "runs_unknown": 0, "runs_violating": 0, "violations": [],
            "lost_sum": 0, "lost_median": 0, "lost_max": 0, "p_loss": 0.0, "p_loss_low": 0.0,
            "p_loss_high": 0.8, "expected_loss": "permitted", "expected_reason": "acks=1",
            "run_list": []}
    return {**base, **kw}


def done(valid: str, lost: int = 0, error: str | None = None) -> dict[str, Any]:
    return {"run": "r", "seed": 1, "status": "failed" if error else "done", "valid": valid,
            "n_lost_write": lost, "violations": [], "report": None, "error": error}


def test_a_permitted_loss_beside_an_undecided_run_is_unknown_as_junit_says(tmp_path: Path) -> None:
    """An unknown verdict (a partition undecided) may hide a forbidden loss: the page showed
    such a cell as permitted while JUnit and the exit code said unknown."""
    unknown = cell_row(runs_lost=1, runs_unknown=1, lost_sum=3, p_loss=1.0,
                       run_list=[done("unknown", 3)])
    failed = cell_row(runs_total=2, runs_failed=1, runs_lost=1, lost_sum=1, p_loss=1.0,
                      run_list=[done("true", 1), done("unknown", error="the cluster did not come up")])
    for c in (unknown, failed):
        assert status(c) == "unknown" and outcome(c)[0] == "error"
    assert 'data-count="unknown">1 unknown' in render([unknown], tmp_path, ["n-1"])
    assert status(cell_row(runs_lost=1, runs_violating=1, runs_unknown=1)) == "violation"
    assert status(cell_row(runs_lost=1, lost_sum=2)) == "permitted"


def test_every_sweep_of_the_newest_night_is_in_the_grid(tmp_path: Path) -> None:
    """Only the newest sweep's cells were shown, so a violation of an earlier sweep the
    same night vanished from a page titled with that night."""
    bad = cell_row(sweep="a-1", created="2026-11-23T01:00:00Z", cell="kafka.version=3.7",
                   runs_lost=1, runs_violating=1, violations=["lost-write"], lost_sum=1)
    ok = cell_row(sweep="b-1", created="2026-11-23T03:00:00Z", cell="kafka.version=3.8")
    html = render([bad, ok], tmp_path, ["a-1", "b-1"])
    assert 'data-cell="kafka.version=3.7"' in html and 'data-cell="kafka.version=3.8"' in html


def test_a_config_swept_twice_in_a_night_shows_its_worst_cell() -> None:
    early = cell_row(sweep="a-1", created="2026-11-23T01:00:00Z", runs_lost=1, runs_violating=1,
                     violations=["lost-write"], lost_sum=1)
    late = cell_row(sweep="b-1", created="2026-11-23T03:00:00Z")
    for cells in ([early, late], [late, early]):
        (row,) = trend(cells)["rows"]
        assert [e["status"] for e in row["nights"]] == ["violation"]
    newer = cell_row(sweep="c-1", created="2026-11-23T04:00:00Z", runs_lost=2, lost_sum=2)
    (row,) = trend([late, newer])["rows"]
    assert [(e["status"], e["lost"]) for e in row["nights"]] == [("permitted", 2)]


def test_an_anomaly_row_is_a_violation_as_its_example_says() -> None:
    """The checker judges each inconsistent-offsets instance by itself: one forbidden and one
    permitted on a partition were both flagged violations."""
    result = {"partitions": [{"topic": "t", "partition": 0, "violations": ["inconsistent-offsets"]}],
              "anomalies": {"inconsistent-offsets": [
                  {"topic": "t", "partition": 0, "offset": 5, "permitted": False},
                  {"topic": "t", "partition": 0, "offset": 9, "permitted": True},
                  {"topic": "t", "partition": 0, "offset": 12}]}}
    cell = Cell("n-1", "2026-11-23T02:00:00Z", "2026-11-23", "r1", {"seed": 1}, "done",
                Path("/nonexistent"), None)
    assert [r["violation"] for r in anomaly_rows(cell, result)] == [True, False, True]


def test_two_configs_with_one_key_are_not_merged(tmp_path: Path) -> None:
    """The key names only what a sweep swept: two sweeps of a night over acks, one under
    kills and one under partitions (their defaults), have the same keys. The page kept the
    worse of the two as one config, so the partition grid, its violation, vanished; the
    trend merged them too."""
    kill = cell_row(sweep="a-1", created="2026-11-23T01:00:00Z")
    part = cell_row(sweep="b-1", created="2026-11-23T03:00:00Z", nemesis_faults="partition",
                    runs_lost=1, runs_violating=1, violations=["lost-write"], lost_sum=1)
    html = render([kill, part], tmp_path, ["a-1", "b-1"])
    assert "faults: kill" in html and "faults: partition" in html
    rows = trend([kill, part])["rows"]
    assert sorted((r["key"], r["nights"][0]["status"]) for r in rows) == [
        ("producer.acks=1 (nemesis_faults=kill)", "clean"),
        ("producer.acks=1 (nemesis_faults=partition)", "violation")]


def test_a_run_whose_loss_is_undecided_is_not_counted_a_run_without_loss(tmp_path: Path) -> None:
    """An unknown run that lost nothing may have lost what the check could not decide: the
    page said "loss in 0 of 2 runs" with one such run, and put a cell with no decided run
    at p(loss) 0 in the price plot."""
    cell = cell_row(runs=2, runs_unknown=1, runs_undecided=1, p_loss=0.0,
                    run_list=[done("true"), done("unknown")])
    html = render([cell], tmp_path, ["n-1"])
    assert "loss in 0 of 1 runs" in html and "1 undecided" in html
    assert trend([cell])["rows"][0]["nights"][0]["n"] == 1
    none = cell_row(runs=1, runs_unknown=1, runs_undecided=1, p_loss=None, p_loss_low=None,
                    p_loss_high=None, run_list=[done("unknown")])
    assert "loss in 0 of 0 runs (-, 95% -), 1 undecided" in render([none], tmp_path, ["n-1"])
    script, _ = price_plot([none])
    assert '["p",[{"type":"number","value":"nan"}]]' in script


def test_a_cell_that_never_ran_is_shown_under_its_swept_config(tmp_path: Path) -> None:
    """A cell left pending (the sweep was stopped) has no test.json: its runs row had no
    config, so the page showed it under "faults: none", acks=None, as if it were a cell
    without faults."""
    cell = Cell("n-1", "2026-11-23T02:00:00Z", "2026-11-23", "acks=all,faults=kill+partition,seed=3",
                {"producer.acks": "all", "nemesis.faults": ["kill", "partition"], "seed": 3}, "pending",
                tmp_path / "nope", None)
    row = run_row(cell, None, "unknown", None, None, SendFigures())
    assert (row["producer_acks"], row["nemesis_faults"], row["seed"]) == ("all", "kill+partition", 3)
    (grid,) = grids([cell_row(**{k: row[k] for k in ("producer_acks", "nemesis_faults")}, runs=0,
                              runs_failed=1)], tmp_path)
    assert (grid["faults"], [r["acks"] for r in grid["rows"]]) == ("kill+partition", ["all"])


def test_the_first_loss_is_the_earliest_acked_lost_write_beyond_the_kept_examples(tmp_path: Path) -> None:
    """Found by review: ``first_loss_ns`` was the earliest ack among the lost writes'
    examples, the first MAX_ANOMALY_EXAMPLES in invoke order; with more lost writes the earliest
    acked (here the last invoked, acked first) was not among them."""
    h = H()
    for v in range(MAX_ANOMALY_EXAMPLES + 1):
        h.invoke(0, v)
    h.done(0, MAX_ANOMALY_EXAMPLES, offset=MAX_ANOMALY_EXAMPLES)
    first = h.ops[-1].time
    for v in range(MAX_ANOMALY_EXAMPLES):
        h.done(0, v, offset=v)
    h.drain([], hw=0)  # the log is gone below every ack: every one is lost
    result = check(make_spec(), h.ops).to_json()
    assert result["anomaly_counts"]["lost-write"] == MAX_ANOMALY_EXAMPLES + 1
    assert len(result["anomalies"]["lost-write"]) == MAX_ANOMALY_EXAMPLES
    cell = Cell("n-1", "2026-11-23T02:00:00Z", "2026-11-23", "seed=1", {"seed": 1}, "done",
                tmp_path, None)
    row = run_row(cell, None, "false", result, None, SendFigures())
    assert row["first_loss_ns"] == first


def test_a_config_is_named_by_the_columns_its_known_configs_differ_in() -> None:
    """Runs that wrote no test.json are a row of their key with only the swept columns
    (aggregate.cells): every other column differed from it, so each config of the key,
    on the page and in junit.xml, was named by all ~30 config columns."""
    old = cell_row(workload_rate=0.0, backend="local", topic_name="fl-queue")
    new = cell_row(workload_rate=100.0, backend="local", topic_name="fl-queue")
    unknown = cell_row(workload_rate=None, backend=None, topic_name=None)
    named = names([old, new, unknown])
    assert [named[config(c)] for c in (old, new, unknown)] == [
        "producer.acks=1 (workload_rate=0.0)", "producer.acks=1 (workload_rate=100.0)",
        "producer.acks=1 (workload_rate=None)"]
    # a night whose runs all failed before test.json, beside a night that ran: one column
    assert sorted(names([old, unknown]).values()) == ["producer.acks=1 (backend=None)",
                                                      "producer.acks=1 (backend=local)"]
    # a column set in one config and not in the other still tells them apart
    home = cell_row(kafka_home="/opt/kafka")
    assert sorted(names([cell_row(), home]).values()) == [
        "producer.acks=1 (kafka_home=/opt/kafka)", "producer.acks=1 (kafka_home=None)"]
