"""report.html references nothing outside itself: no script, stylesheet, font, image or
frame from anywhere else; its only links are to its own anchors and to the run's files
beside it (which exist)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from faultline.report.page import build_report
from tests.e2e.report_runs import make_run

pytestmark = pytest.mark.e2e

#: Attributes that make a browser fetch or navigate to something.
URL_ATTRS = frozenset(("src", "href", "srcset", "poster", "data", "action", "formaction", "background",
                       "xlink:href", "manifest", "ping", "longdesc", "cite", "codebase", "archive"))
EMBEDDING_TAGS = frozenset(("link", "iframe", "frame", "object", "embed", "img", "image", "video",
                            "audio", "source", "track", "base", "form", "picture"))
CSS_FETCH = re.compile(r"@import|@font-face|url\s*\(", re.IGNORECASE)


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.refs: list[tuple[str, str, str]] = []
        self.tags: list[str] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._in_style = tag == "style"
        for name, value in attrs:
            if name in URL_ATTRS and value is not None:
                self.refs.append((tag, name, value))
            if name == "style" and value:
                self.styles.append(value)
            if tag == "meta" and name == "http-equiv" and value and value.lower() == "refresh":
                self.refs.append((tag, name, value))

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = make_run(tmp_path_factory.mktemp("runs") / "20261122T000000Z")
    return build_report(run.path)


def test_no_external_references(report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    refs = _Refs()
    refs.feed(html)
    assert refs.tags.count("script") >= 2  # bokeh inline, and the plots
    assert [t for t in refs.tags if t in EMBEDDING_TAGS] == []
    for tag, attr, value in refs.refs:
        assert tag == "a" and attr == "href", f"<{tag} {attr}={value!r}> loads something"
        if value.startswith("#"):
            assert f'id="{value[1:]}"' in html, f"anchor {value} has no target"
            continue
        assert "://" not in value and not value.startswith(("//", "/", "..")) and ":" not in value, value
        assert (report.parent / value).exists(), f"link to {value}, which is not in the run directory"
    assert [s for s in refs.styles if CSS_FETCH.search(s)] == []


def test_scripts_are_inline(report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    assert re.search(r"<script[^>]*\bsrc\s*=", html, re.IGNORECASE) is None
    assert re.search(r"<link\b", html, re.IGNORECASE) is None
    assert "cdn.bokeh.org" not in html
