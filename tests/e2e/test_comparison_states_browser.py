"""``comparison.html`` of a night with targeted runs (``schedules: targeted``), analyzed by
``faultline analyze`` and opened in headless Chromium as tests/e2e/test_analysis_browser.py
does: each state in its own colour, the run that shows it linked, and junit.xml's case per
cell and recipe. Screenshots: ``test-artifacts/comparison-states.png`` and
``comparison-states-full.png``.

The night, acks x min.insync.replicas under kill + partition, each cell a random seed (the
stored real run, no loss, its config rewritten) and the recipe leader-crash-followers-held:

- acks=1, min.insync=2: the recipe's run lost a write (a simulated run): demonstrated;
- acks=1, min.insync=1: no run lost one, though the model says the recipe loses data
  there: not demonstrated, flagged;
- acks=all, min.insync=2: no run lost one: held;
- acks=all, min.insync=1: the recipe's run lost a write: a violation, by that recipe.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from playwright.sync_api import Page

from faultline.cli import main
from faultline.report.page import build_report
from tests.analysis_sweeps import REAL_RUN, CellRun, make_sweep
from tests.e2e.test_report_browser import VIEWPORT, opened

pytestmark = pytest.mark.e2e

RECIPE = "leader-crash-followers-held"
FAULTS = ["kill", "partition"]
STATES = {("1", 2): "demonstrated", ("1", 1): "not-demonstrated", ("all", 2): "held", ("all", 1): "violation"}


def _cells() -> list[CellRun]:
    out = []
    for (acks, mi), state in STATES.items():
        axes = {"producer.acks": acks, "topic.min_insync_replicas": mi, "nemesis.faults": FAULTS}
        config = {"producer.acks": acks, "producer.enable_idempotence": acks == "all",
                  "topic.min_insync_replicas": mi, "nemesis.faults": FAULTS}
        name = f"acks={acks},min_insync={mi},faults=kill+partition"
        loses = state in ("demonstrated", "violation")
        out += [CellRun(f"{name},seed=3", {**axes, "seed": 3}, source=REAL_RUN, config={**config, "seed": 3}),
                CellRun(f"{name},recipe={RECIPE}", axes, source=None if loses else REAL_RUN, seed=3,
                        config=config, recipe=RECIPE,
                        predicts=("inconsistent-offsets", "lost-write") if acks == "1" else ())]
    return out


@pytest.fixture(scope="module")
def night(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("targeted")
    sweep = make_sweep(root / "sweep", "smoke", "2026-11-29T02:00:00Z", _cells())
    for run in (sweep / "cells").iterdir():
        build_report(run)
    out = sweep.parent / "analysis"
    result = CliRunner().invoke(main, ["analyze", str(sweep), "--out", str(out), "--master", "local[2]"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return out, result.exit_code


@pytest.fixture(scope="module")
def page(night: tuple[Path, int]) -> Iterator[tuple[Page, dict[str, list[str]]]]:
    yield from opened((night[0] / "comparison.html").as_uri(), "comparison-states")


def _cell(pg: Page, acks: str, mi: int) -> Any:
    return pg.locator(f'.cell[data-cell="nemesis.faults=kill+partition,producer.acks={acks},'
                      f'topic.min_insync_replicas={mi}"]')


def test_each_cell_shows_its_state_in_its_own_colour(page: tuple[Page, dict[str, list[str]]]) -> None:
    pg, seen = page
    assert seen["errors"] == []
    colours = {}
    for (acks, mi), state in STATES.items():
        cell = _cell(pg, acks, mi)
        assert cell.get_attribute("data-state") == state
        assert cell.is_visible()
        box = cell.bounding_box()
        assert box is not None and box["y"] < VIEWPORT["height"] * 2
        colours[state] = cell.evaluate("e => getComputedStyle(e).borderLeftColor")
    assert len(set(colours.values())) == 4, colours
    assert colours["not-demonstrated"] != colours["held"], "a permitted loss not shown is not painted green"
    assert pg.locator('[data-count="not-demonstrated"]').inner_text() == "1 not demonstrated"


def test_each_state_says_why_and_links_the_run_that_shows_it(night: tuple[Path, int],
                                                             page: tuple[Page, dict[str, list[str]]]) -> None:
    pg = page[0]
    shown = _cell(pg, "1", 2).locator(".why a")
    assert shown.inner_text() == f"lost 1 acknowledged write under recipe {RECIPE}, permitted"
    href = shown.get_attribute("href")
    assert href is not None and f"recipe={RECIPE}" in href and (night[0] / href).exists()
    assert _cell(pg, "all", 1).locator(".why").inner_text() == \
        f"lost-write, inconsistent-offsets under recipe {RECIPE}"
    held = _cell(pg, "all", 2).locator(".why").inner_text()
    assert held == "no loss under 1 targeted schedule and 1 random seed"
    flagged = _cell(pg, "1", 1).inner_text()
    assert f"the model loses data under {RECIPE} here, and Kafka kept every write" in flagged
    assert "loss in 0 of 1 runs" in flagged, "the random seeds' figures stay beside"
    recipe = _cell(pg, "1", 2).locator(f'.recipe[data-recipe="{RECIPE}"]')
    assert "lost" in recipe.inner_text() and "model: loses data" in recipe.inner_text()


def test_junit_has_a_case_per_cell_and_recipe(night: tuple[Path, int]) -> None:
    out, exit_code = night
    root = ET.parse(out / "junit.xml").getroot()
    kinds = {c.get("name"): [e.tag for e in c if e.tag != "system-out"] for c in root.iter("testcase")}
    names = {f"nemesis.faults=kill+partition,producer.acks={a},topic.min_insync_replicas={m}": s
             for (a, m), s in STATES.items()}
    recipe_case = {"violation": ["failure"], "not-demonstrated": ["skipped"]}
    assert kinds == {**{n: [] for n in names},
                     **{f"{n} / {RECIPE}": recipe_case.get(s, []) for n, s in names.items()}}
    assert exit_code == 1
