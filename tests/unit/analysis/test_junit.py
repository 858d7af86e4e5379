"""The JUnit XML of a night (faultline/analysis/junit.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from faultline.analysis.junit import exit_code, outcome, write_junit


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
    cell("both", run("s1", "false", ("duplicate",), report="/r/b1/report.html"), run("s2", error="x")),
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


def test_a_violation_the_broker_state_left_undecided_is_unknown_not_a_failure(tmp_path: Path) -> None:
    """A run whose broker state could not be read is unknown whatever the history found
    (broker-state-unreadable keeps its violations list): JUnit failed it and the exit code
    was 1, where its results.json, its report and ``faultline sweep`` say unknown (2)."""
    undecided = cell("acks=all", run("s1", "unknown", ("lost-write",), report="/r/s1/report.html"))
    root = ET.parse(write_junit(tmp_path / "junit.xml", [undecided])).getroot()
    (case,) = root.iter("testcase")
    assert [e.tag for e in case] == ["error"]
    assert "s1: verdict unknown" in case[0].get("message", "")
    assert exit_code([undecided]) == 2


def test_a_cell_the_sweep_never_ran_says_so() -> None:
    """A cell left pending (the sweep was stopped) or running (it crashed) was reported
    "verdict unknown", as if it had run and the check could not decide."""
    pending = {**run("s1", "unknown"), "status": "pending"}
    running = {**run("s2", "unknown"), "status": "running"}
    undecided = {**run("s3", "unknown"), "status": "done"}
    kind, message = outcome(cell("acks=1", pending, running, undecided))
    assert kind == "error"
    assert message == ("unknown or failed in 3 of 3 runs: s1: not run (pending); "
                       "s2: not finished (left running); s3: verdict unknown")


def test_two_configs_of_one_key_are_two_test_cases_with_their_own_names(tmp_path: Path) -> None:
    """A sweep resumed after a default of faultline's changed has two cells rows of one key
    (aggregate.cells): junit.xml gave both the same classname and name, which CI tools
    (Jenkins, GitLab) merge or overwrite, so the failing one could be hidden behind the
    passing one. Each is named by what tells it apart, as the comparison page does."""
    old = {**cell("acks=all", run("s1", "false", ("lost-write",))), "kafka_heap_mb": 512}
    new = {**cell("acks=all", run("s2")), "kafka_heap_mb": 1024}
    root = ET.parse(write_junit(tmp_path / "junit.xml", [old, new, cell("acks=1", run("s3"))])).getroot()
    cases = {c.get("name"): [e.tag for e in c] for c in root.iter("testcase")}
    assert cases == {"acks=all (kafka_heap_mb=512)": ["failure"], "acks=all (kafka_heap_mb=1024)": [],
                     "acks=1": []}
