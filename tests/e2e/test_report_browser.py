"""The report of a stored run with a lost write, opened in headless Chromium.

Chromium is Debian's package at /usr/bin/chromium (``faultline setup`` installs it);
playwright-python drives it over the DevTools protocol with ``executable_path``, never
a browser of its own. The screenshots are kept in ``test-artifacts/`` (git-ignored):
``report-lost-write.png`` (what a person sees first) and ``report-lost-write-full.png``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from faultline.report.page import build_report
from tests.e2e.report_runs import StoredRun, make_run

pytestmark = pytest.mark.e2e

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
#: --headless and --user-data-dir (a fresh temporary directory) are passed by playwright
#: itself, from headless=True and launch_persistent_context's first argument.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[StoredRun, Path]:
    run = make_run(tmp_path_factory.mktemp("runs") / "20261122T000000Z")
    return run, build_report(run.path)


def opened(url: str, shots: str) -> Iterator[tuple[Page, dict[str, list[str]]]]:
    """``url`` open in headless Chromium once its Bokeh documents are idle, with the page's
    ``errors`` (uncaught exceptions, console errors, failed requests) and ``requests`` seen
    so far; screenshots ``<shots>.png`` and ``<shots>-full.png`` in :data:`ARTIFACTS`."""
    if not CHROMIUM.exists():
        pytest.skip(f"Debian's chromium is not at {CHROMIUM}: `faultline setup` (or `apt-get install -y "
                    "chromium`) installs it")
    seen: dict[str, list[str]] = {"errors": [], "requests": []}
    with sync_playwright() as pw, tempfile.TemporaryDirectory(prefix="fl-chromium-") as profile:
        ctx = pw.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), headless=True, args=FLAGS, viewport=VIEWPORT)
        try:
            pg = ctx.new_page()
            pg.on("pageerror", lambda e: seen["errors"].append(f"uncaught: {e}"))
            pg.on("console", lambda m: seen["errors"].append(f"console.{m.type}: {m.text}")
                  if m.type in ("error", "assert") else None)
            pg.on("request", lambda r: seen["requests"].append(r.url))
            pg.on("requestfailed", lambda r: seen["errors"].append(f"request failed: {r.url}"))
            pg.goto(url, wait_until="load")
            pg.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0"
                                 " && Bokeh.documents[0].is_idle", timeout=60_000)
            ARTIFACTS.mkdir(exist_ok=True)
            pg.screenshot(path=str(ARTIFACTS / f"{shots}.png"))
            pg.screenshot(path=str(ARTIFACTS / f"{shots}-full.png"), full_page=True)
            yield pg, seen
        finally:
            ctx.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def page(stored: tuple[StoredRun, Path]) -> Iterator[tuple[Page, dict[str, list[str]]]]:
    yield from opened(stored[1].as_uri(), "report-lost-write")


def test_loads_without_javascript_errors(page: tuple[Page, dict[str, list[str]]]) -> None:
    assert page[1]["errors"] == []


def test_fetches_nothing_but_itself(stored: tuple[StoredRun, Path],
                                    page: tuple[Page, dict[str, list[str]]]) -> None:
    own = stored[1].as_uri()
    foreign = [u for u in page[1]["requests"] if u != own and not u.startswith(("data:", "blob:"))]
    assert foreign == []


def test_verdict_at_a_glance(page: tuple[Page, dict[str, list[str]]]) -> None:
    pg = page[0]
    verdict = pg.locator("#verdict")
    assert verdict.is_visible()
    assert "INVALID" in verdict.inner_text()
    assert "1 acknowledged write lost" in verdict.inner_text()
    box = verdict.bounding_box()
    assert box is not None and box["y"] + box["height"] <= VIEWPORT["height"] / 4
    config = pg.locator("#config").inner_text()
    assert "acks=all" in config and "min.insync.replicas=2" in config


def test_fault_bands_drawn(page: tuple[Page, dict[str, list[str]]]) -> None:
    pg = page[0]
    info: dict[str, Any] = pg.evaluate("""() => {
        const ms = [...Bokeh.documents[0].all_models];
        const data = (m) => m.data instanceof Map ? Object.fromEntries(m.data) : m.data;
        const bands = ms.filter(m => m.type === 'GlyphRenderer' && m.glyph.type === 'VStrip')
                        .map(m => { const d = data(m.data_source);
                                    return [...d.x0].map((x, i) => [x, d.x1[i]]); });
        const labels = ms.filter(m => m.type === 'ColumnDataSource' && 'label' in data(m))
                         .flatMap(m => [...data(m).label]);
        let canvases = 0;
        const walk = (root) => root.querySelectorAll('*').forEach(e => {
            if (e.tagName === 'CANVAS') canvases++;
            if (e.shadowRoot) walk(e.shadowRoot);
        });
        walk(document);
        return {bands, labels, canvases};
    }""")
    # the kill of node 2 from 10 s until its start completed at 18.4 s, shaded over the
    # throughput, latency, errors and availability plots and the three white-box traces
    assert info["bands"] == [[[10.0, 18.4]]] * 7
    assert info["labels"] == ["kill n2"]
    assert info["canvases"] >= 8
    assert pg.locator("#faults tr.fault").count() == 1


def test_lost_write_row_with_its_story(stored: tuple[StoredRun, Path],
                                       page: tuple[Page, dict[str, list[str]]]) -> None:
    (lost,) = stored[0].lost
    row = page[0].locator(f'tr.example[data-anomaly="lost-write"][data-value="{lost["value"]}"]')
    assert row.count() == 1 and row.is_visible()
    row.scroll_into_view_if_needed()  # laid out once scrolled to (content-visibility)
    # drawn from the page's compressed stories, and rendered, within the default timeout
    expect(row).to_contain_text("acknowledged", use_inner_text=True)
    story = row.inner_text()
    # the wording is the checker's (results.json's story); the facts must be there
    assert f"offset {lost['offset']}" in story and "acknowledged" in story
    assert "kill" in story and "18.4" in story  # the kill of node 2 that followed, until 18.4 s
    assert "nowhere" in story  # what the partition holds now
    assert "leader n2 (ISR [1, 2, 3]" in story  # the leader of that time, from observations.jsonl


def test_broker_state_section(page: tuple[Page, dict[str, list[str]]]) -> None:
    pg = page[0]
    section = pg.locator("#broker-state")
    section.scroll_into_view_if_needed()
    assert section.is_visible()
    rows = pg.locator("#invariants tr.invariant")
    assert rows.count() == 4
    row = pg.locator('#invariants tr[data-invariant="leader-from-isr-or-elr"]')
    assert "held" in row.inner_text()
    election = pg.locator("#elections tr.election")
    assert election.count() == 1
    assert "n2 → n3" in election.inner_text() and "clean, from the ISR" in election.inner_text()
