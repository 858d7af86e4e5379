"""The JUnit XML of a night: one test case per cell, for CI systems.

A cell's test case fails when any of its runs has a violation (its verdict is false: an
anomaly its config's guarantees forbid, on the partition that saw it): the message names
the violations, in how many runs, and the report of the first such run. It is an error
when no run violated but some run's verdict is unknown (even one that lists violations:
a run whose broker state could not be read is unknown whatever its history showed) or a
run could not be made or checked (a failed cell). Otherwise it passes. :func:`exit_code`
gives ``faultline nightly``'s exit status from the same rows: 1 for a violation, else 2
for an unknown or failed cell, else 0.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from faultline.analysis.comparison import config, names
from faultline.rundir import write_atomic

#: What a run without an error says of a cell the sweep did not finish.
_NOT_DONE = {"pending": "not run (pending)", "running": "not finished (left running)"}


def outcome(cell: Mapping[str, Any]) -> tuple[str, str]:
    """(``failure`` | ``error`` | ``passed``, message) for one row of the ``cells`` table."""
    runs = list(cell.get("run_list") or ())
    n = int(cell.get("runs_total") or len(runs))
    bad = [r for r in runs if r.get("valid") == "false"]
    if bad:
        kinds = sorted({v for r in bad for v in r.get("violations") or ()}) or ["a forbidden anomaly"]
        report = bad[0].get("report") or f"{bad[0].get('run')} (no report.html)"
        return "failure", (f"violation: {', '.join(kinds)} in {len(bad)} of {n} runs; "
                           f"report: {report}")
    failed = [r for r in runs if r.get("error") or r.get("valid") not in ("true", "false")]
    if failed:
        why = "; ".join(f"{r.get('run')}: "
                        f"{r.get('error') or _NOT_DONE.get(str(r.get('status')), 'verdict unknown')}"
                        for r in failed)
        return "error", f"unknown or failed in {len(failed)} of {n} runs: {why}"
    return "passed", ""


def write_junit(path: Path, cells: Sequence[Mapping[str, Any]], suite: str = "faultline") -> Path:
    """Write ``cells`` (rows of the ``cells`` table) as JUnit XML to ``path`` (atomically): one
    ``testsuite`` per sweep, one ``testcase`` per cell (classname: the sweep, name: the cell's
    config as the comparison page names it, :func:`faultline.analysis.comparison.names`).
    The names are unique in a suite: CI tools merge test cases of one name, so a failing one
    could hide behind a passing one."""
    root = ET.Element("testsuites", name=suite)
    by_sweep: dict[str, list[Mapping[str, Any]]] = {}
    for c in cells:
        by_sweep.setdefault(str(c["sweep"]), []).append(c)
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for sweep, rows in by_sweep.items():
        ts = ET.SubElement(root, "testsuite", name=sweep)
        counts = {"tests": 0, "failures": 0, "errors": 0}
        named = names(rows)
        for c in rows:
            case = ET.SubElement(ts, "testcase", classname=sweep, name=named[config(c)])
            kind, message = outcome(c)
            counts["tests"] += 1
            if kind != "passed":
                counts["failures" if kind == "failure" else "errors"] += 1
                ET.SubElement(case, kind, message=message).text = message
        for k, v in counts.items():
            ts.set(k, str(v))
            totals[k] += v
    for k, v in totals.items():
        root.set(k, str(v))
    ET.indent(root)
    return write_atomic(Path(path), ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n")


def exit_code(cells: Sequence[Mapping[str, Any]]) -> int:
    """1 when a cell has a violation, else 2 when one is unknown or failed, else 0."""
    kinds = {outcome(c)[0] for c in cells}
    return 1 if "failure" in kinds else 2 if "error" in kinds else 0
