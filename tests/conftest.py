"""``FAULTLINE_REQUIRE_ALL=1`` (set by ``make test``, and so by CI): every skip is a failure.

A test skips when a prerequisite is missing (root, a cluster that would not start,
Toxiproxy, Chromium, ...), so that someone running a subset without root still gets an
answer. Where the set-up has just run, a skip means the set-up broke: under the switch
the skip becomes a failure whose one line is the skip's reason, and the terminal summary
lists each missing prerequisite once.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest
from _pytest._code import ExceptionInfo
from _pytest.reports import CollectReport, TestReport
from _pytest.runner import CallInfo
from _pytest.terminal import TerminalReporter
from hypothesis import settings

# No per-example deadline: the suite shares a 2-core machine with clusters, so a slow
# example says nothing about the code (a test must not depend on timing luck).
settings.register_profile("faultline", deadline=None)
settings.load_profile("faultline")

REQUIRE_ALL = "FAULTLINE_REQUIRE_ALL"
_missing: dict[str, int] = {}  # reason -> how many tests it failed


def _required() -> bool:
    return os.environ.get(REQUIRE_ALL) == "1"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: CallInfo[None]
) -> Generator[None, TestReport, TestReport]:
    """Under the switch, a skip (``pytest.skip``, ``skipif``, ``importorskip``) is reported as
    a failure carrying its reason."""
    if _required() and call.excinfo is not None and isinstance(call.excinfo.value, pytest.skip.Exception):
        reason = f"missing prerequisite ({REQUIRE_ALL}=1): {call.excinfo.value.msg}"
        _missing[reason] = _missing.get(reason, 0) + 1
        try:
            pytest.fail(reason, pytrace=False)
        except pytest.fail.Exception:
            call.excinfo = ExceptionInfo.from_current()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, CollectReport, CollectReport]:
    """The same for a whole module skipped while it is collected (a module-level
    ``importorskip`` or ``pytest.skip(allow_module_level=True)``)."""
    report = yield
    if _required() and report.skipped and isinstance(report.longrepr, tuple):
        reason = f"missing prerequisite ({REQUIRE_ALL}=1): {report.longrepr[2].removeprefix('Skipped: ')}"
        _missing[reason] = _missing.get(reason, 0) + 1
        report.outcome = "failed"
        report.longrepr = reason
    return report


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    for reason, n in _missing.items():
        terminalreporter.write_line(f"{reason} ({n} test{'s' if n > 1 else ''})", red=True, bold=True)
