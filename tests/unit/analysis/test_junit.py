"""The JUnit XML of a night (faultline/analysis/junit.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from faultline.analysis.junit import exit_code, write_junit


def run(name: str, valid: str = "true", violations: tuple[str, ...] = (), error: str | None = None,
        report: str | None = None) -> dict[str, Any]:
    return {"run": name, "valid": valid, "violations": list(violations), "error": error, "report": report}


def cell(name: str, *runs: dict[str, Any], sweep: str = "smoke-1") -> dict[str, Any]:
    return {"sweep": sweep, "cell": name, "runs_total": len(runs), "run_list": list(runs)}


CELLS = [
    cell("acks=all", run("s1", "false", ("lost-write",), report="/r/s1/report.html"), run("s2")),
    cell("acks=1", run("s1"), run("s2")),
    cell("acks=0", run("s1"), run("s2", "unknown")),
    cell("acks=all,unclean", run("s1", error="the cluster did not come up")),
    cell("both", run("s1", "unknown", ("duplicate",), report="/r/b1/report.html"), run("s2", error="x")),
]


def test_one_case_per_cell_failed_on_a_violation_error_when_unknown(tmp_path: Path) -> None:
    root = ET.parse(write_junit(tmp_path / "junit.xml", CELLS)).getroot()
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "smoke-1"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("5", "2", "2")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert list(cases) == ["acks=all", "acks=1", "acks=0", "acks=all,unclean", "both"]
    failure = cases["acks=all"].find("failure")
    assert failure is not None
    assert failure.get("message") == "violation: lost-write in 1 of 2 runs; report: /r/s1/report.html"
    assert list(cases["acks=1"]) == []
    unknown = cases["acks=0"].find("error")
    assert unknown is not None and "s2: verdict unknown" in unknown.get("message", "")
    failed = cases["acks=all,unclean"].find("error")
    assert failed is not None and "the cluster did not come up" in failed.get("message", "")
    both = cases["both"]  # a violation beats an unknown
    assert [e.tag for e in both] == ["failure"]


def test_exit_code() -> None:
    assert exit_code(CELLS) == 1
    assert exit_code(CELLS[1:4]) == 2
    assert exit_code(CELLS[1:2]) == 0
    assert exit_code([]) == 0
