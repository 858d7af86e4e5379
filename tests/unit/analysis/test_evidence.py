"""A cell's state from its random seeds and its targeted runs (faultline/analysis/evidence.py),
as the comparison page and junit.xml show it."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from faultline.analysis.comparison import COLORS, render, trend
from faultline.analysis.evidence import evidence, with_targeted
from faultline.analysis.junit import exit_code, write_junit
from tests.unit.analysis.test_comparison import cell_row, done

CRASH, UNCLEAN = "leader-crash-followers-held", "unclean-election-stale-follower"
WIPE = "wipe-last-isr-member"


def targeted(recipe: str, valid: str = "true", lost: int = 0, predicts: tuple[str, ...] = (),
             status: str = "done", **kw: Any) -> dict[str, Any]:
    """A ``runs`` row of a targeted run of cells row :func:`cell_row`'s sweep and key."""
    return {"sweep": "n-1", "cell": "producer.acks=1", "run": f"producer.acks=1,recipe={recipe}",
            "recipe": recipe, "predicts": list(predicts), "status": status, "valid": valid,
            "n_lost_write": lost, "violations": [], "report": f"/r/{recipe}/report.html", "error": None, **kw}


def cell(*runs: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """A cells row (one random seed, no loss unless ``kw`` says) with ``runs`` as its targeted runs."""
    return {**cell_row(**{"run_list": [done("true")], **kw}), "targeted": list(runs)}


def test_a_permitted_loss_is_demonstrated_by_the_recipe_that_lost_writes() -> None:
    ev = evidence(cell(targeted(UNCLEAN), targeted(CRASH, lost=777, predicts=("lost-write",)),
                       runs_lost=1, lost_sum=11, run_list=[done("true", 11)]))
    assert (ev.state, ev.why) == ("demonstrated",
                                  f"lost 777 acknowledged writes under recipe {CRASH}, permitted")
    assert ev.run is not None and ev.run["recipe"] == CRASH, "a recipe is named before a seed"
    seed = evidence(cell(targeted(CRASH), runs_lost=1, lost_sum=11, run_list=[done("true", 11)]))
    assert (seed.state, seed.why) == ("demonstrated", "lost 11 acknowledged writes under seed 1, permitted")


def test_a_forbidden_loss_no_run_showed_held_under_every_schedule() -> None:
    ev = evidence(cell(targeted(CRASH), targeted(UNCLEAN), expected_loss="forbidden"))
    assert (ev.state, ev.why, ev.schedules, ev.seeds) == (
        "held", "no loss under 2 targeted schedules and 1 random seed", 2, 1)
    assert evidence(cell_row(expected_loss="forbidden")).state == "held", "a sweep without targeted runs"


def test_a_permitted_loss_no_run_showed_is_flagged_with_why() -> None:
    missing = evidence(cell(targeted(UNCLEAN)))
    assert (missing.state, missing.why) == (
        "not-demonstrated", "loss permitted, none under 1 targeted schedule and 1 random seed: no recipe of "
                            "the model loses data on this config under its faults")
    kept = evidence(cell(targeted(CRASH, predicts=("inconsistent-offsets", "lost-write")), targeted(UNCLEAN)))
    assert (kept.state, kept.why.split(": ", 1)[1]) == (
        "not-demonstrated", f"the model loses data under {CRASH} here, and Kafka kept every write")
    assert evidence(cell_row()).state == "not-demonstrated", "a clean random seed is no evidence either"


def test_a_violation_beats_a_demonstration_and_an_undecided_run_beats_both() -> None:
    bad = targeted(UNCLEAN, valid="false", lost=5, violations=["lost-write"])
    ev = evidence(cell(targeted(CRASH, lost=9), bad, expected_loss="forbidden"))
    assert (ev.state, ev.why, ev.run) == ("violation", f"lost-write under recipe {UNCLEAN}", bad)
    failed = targeted(UNCLEAN, valid="unknown", status="failed", error="the cluster did not come up")
    assert evidence(cell(targeted(CRASH, lost=9), failed)).state == "unknown", "as junit.xml says (error)"
    assert evidence(cell(targeted(CRASH, valid="unknown", lost=9))).state == "unknown"


def test_targeted_runs_join_their_cell_by_sweep_and_key() -> None:
    rows = [cell_row(), cell_row(cell="producer.acks=all"), cell_row(sweep="n-2")]
    runs = [targeted(CRASH), {**targeted(CRASH), "cell": "producer.acks=all"},
            {**done("true"), "recipe": None}]
    joined = with_targeted(rows, runs)
    assert [[r["cell"] for r in c["targeted"]] for c in joined] == [
        ["producer.acks=1"], ["producer.acks=all"], []]


def test_the_page_shows_each_state_in_its_own_colour_and_the_flag_is_not_green(tmp_path: Path) -> None:
    cells = [cell(targeted(CRASH, lost=777), cell="producer.acks=1", producer_acks="1"),
             cell(targeted(CRASH), cell="producer.acks=all", producer_acks="all", expected_loss="forbidden"),
             cell(targeted(CRASH, predicts=("lost-write",)), cell="producer.acks=0", producer_acks="0")]
    cells[1]["targeted"][0]["cell"] = "producer.acks=all"
    html = render(cells, tmp_path, ["n-1"])
    for key, state in (("producer.acks=1", "demonstrated"), ("producer.acks=all", "held"),
                       ("producer.acks=0", "not-demonstrated")):
        assert f'data-cell="{key}" data-state="{state}"' in html
    assert 'data-count="not-demonstrated">1 not demonstrated' in html
    assert f"lost 777 acknowledged writes under recipe {CRASH}, permitted" in html
    assert len({COLORS[s] for s in ("demonstrated", "held", "not-demonstrated")}) == 3


def test_a_night_with_two_sweeps_of_a_config_shows_the_one_that_demonstrated() -> None:
    flagged = cell(created="2026-11-23T03:00:00Z")
    shown = cell(targeted(CRASH, lost=3), sweep="n-0", created="2026-11-23T01:00:00Z")
    (row,) = trend([flagged, shown])["rows"]
    assert [(e["state"], e["status"]) for e in row["nights"]] == [("demonstrated", "clean")]


def test_junit_has_a_case_per_cell_and_recipe(tmp_path: Path) -> None:
    loses = ("lost-write",)
    rows = [cell(targeted(CRASH, lost=777, predicts=loses), targeted(UNCLEAN, predicts=loses),
                 targeted(WIPE)),
            cell(targeted(CRASH, valid="false", lost=3, violations=["lost-write"]), cell="producer.acks=all",
                 expected_loss="forbidden")]
    root = ET.parse(write_junit(tmp_path / "junit.xml", rows)).getroot()
    cases = {c.get("name"): [(e.tag, e.get("message") or e.text) for e in c] for c in root.iter("testcase")}
    assert cases == {
        "producer.acks=1": [],
        f"producer.acks=1 / {CRASH}": [
            ("system-out", f"demonstrated: lost 777 acknowledged writes under recipe {CRASH}, permitted; "
                           f"report: /r/{CRASH}/report.html")],
        f"producer.acks=1 / {UNCLEAN}": [
            ("skipped", f"not demonstrated: the model loses data under recipe {UNCLEAN} on this config, "
                        f"and Kafka kept every write; report: /r/{UNCLEAN}/report.html")],
        f"producer.acks=1 / {WIPE}": [("system-out", f"held: no loss under recipe {WIPE}")],
        "producer.acks=all": [],
        f"producer.acks=all / {CRASH}": [("failure", f"violation: lost-write under recipe {CRASH}; "
                                                     f"report: /r/{CRASH}/report.html")]}
    assert [root.get(k) for k in ("tests", "failures", "errors", "skipped")] == ["6", "1", "0", "1"]
    assert (exit_code(rows), exit_code(rows[:1])) == (1, 0), "not demonstrated fails nothing"
