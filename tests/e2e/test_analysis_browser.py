"""``comparison.html`` of two analyzed nights, opened in headless Chromium (Debian's, driven by
playwright as tests/e2e/test_report_browser.py does). Screenshots go to ``test-artifacts/``:
``comparison.png`` (the first screen) and ``comparison-full.png``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page

from tests.e2e.conftest import Analyzed
from tests.e2e.test_report_browser import VIEWPORT, opened

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def page(analyzed: Analyzed) -> Iterator[tuple[Page, dict[str, list[str]]]]:
    yield from opened((analyzed.out / "comparison.html").as_uri(), "comparison")


def test_loads_offline_without_errors(analyzed: Analyzed, page: tuple[Page, dict[str, list[str]]]) -> None:
    assert page[1]["errors"] == []
    own = (analyzed.out / "comparison.html").as_uri()
    assert [u for u in page[1]["requests"] if u != own and not u.startswith(("data:", "blob:"))] == []


def test_grid_shows_expected_beside_observed_in_colours(page: tuple[Page, dict[str, list[str]]]) -> None:
    pg = page[0]
    bad = pg.locator('.cell[data-cell="nemesis.faults=kill,producer.acks=all"]')
    ok = pg.locator('.cell[data-cell="nemesis.faults=kill,producer.acks=1"]')
    assert bad.get_attribute("data-status") == "violation" and ok.get_attribute("data-status") == "permitted"
    assert "loss forbidden" in bad.inner_text() and "loss in 2 of 2 runs" in bad.inner_text()
    assert "loss permitted" in ok.inner_text() and "loss in 2 of 2 runs" in ok.inner_text()
    colours = {c: pg.locator(f'.cell[data-status="{c}"]').first.evaluate(
        "e => getComputedStyle(e).borderLeftColor") for c in ("violation", "permitted", "unknown")}
    assert len(set(colours.values())) == 3
    assert bad.is_visible()
    box = bad.bounding_box()
    assert box is not None and box["y"] < VIEWPORT["height"]


def test_cells_link_to_their_runs_reports(analyzed: Analyzed,
                                          page: tuple[Page, dict[str, list[str]]]) -> None:
    links = page[0].locator('.cell[data-cell="nemesis.faults=kill,producer.acks=all"] .runs a')
    assert links.count() == 2
    for i in range(2):
        href = links.nth(i).get_attribute("href")
        assert href is not None and (analyzed.out / href).resolve().name == "report.html"
        assert (analyzed.out / href).exists()


def test_price_plots_and_trend(page: tuple[Page, dict[str, list[str]]]) -> None:
    pg = page[0]
    points = pg.evaluate("""() => {
        const ms = [...Bokeh.documents[0].all_models];
        const data = (m) => m.data instanceof Map ? Object.fromEntries(m.data) : m.data;
        return ms.filter(m => m.type === 'ColumnDataSource' && 'cell' in data(m))
                 .map(m => [...data(m).cell].length);
    }""")
    assert points == [3]
    trend = pg.locator("table.trend")
    assert trend.locator("th").all_inner_texts()[1:] == ["2026-11-22", "2026-11-23"]
    row = trend.locator("tr", has_text="nemesis.faults=kill,producer.acks=all").inner_text()
    assert "1/1 lost" in row and "2/2 lost" in row
