"""The JUnit XML of a night: one test case per cell and one per cell and targeted recipe,
for CI systems, so that one shows which schedule broke which config.

A cell's test case (its random seeds) fails when any of its runs has a violation (its verdict is false: an
anomaly its config's guarantees forbid, on the partition that saw it): the message names
the violations, in how many runs, and the report of the first such run. It is an error
when no run violated but some run's verdict is unknown (even one that lists violations:
a run whose broker state could not be read is unknown whatever its history showed) or a
run could not be made or checked (a failed cell). Otherwise it passes.

A targeted run's case (:func:`targeted_outcome`, its cells row's ``targeted``:
:func:`faultline.analysis.evidence.with_targeted`) fails on a violation, is an error
when the run failed or its verdict is unknown, is skipped when it lost nothing though
the model's replay of its recipe loses data on the config (not demonstrated), and
passes otherwise, saying whether it demonstrated a loss or held. :func:`exit_code` gives
``faultline nightly``'s exit status from the same cases: 1 for a failure, else 2 for an
error, else 0.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from faultline.analysis.comparison import config, names
from faultline.analysis.evidence import model_loses, run_status
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
        return "failure", (f"violation: {', '.join(kinds)} in {len(bad)} of {n} runs; "
                           f"report: {_report(bad[0])}")
    failed = [r for r in runs if r.get("error") or r.get("valid") not in ("true", "false")]
    if failed:
        why = "; ".join(f"{r.get('run')}: "
                        f"{r.get('error') or _NOT_DONE.get(str(r.get('status')), 'verdict unknown')}"
                        for r in failed)
        return "error", f"unknown or failed in {len(failed)} of {n} runs: {why}"
    return "passed", ""


def targeted_outcome(run: Mapping[str, Any]) -> tuple[str, str]:
    """(``failure`` | ``error`` | ``skipped`` | ``passed``, message) for one targeted run (a
    ``runs`` row with a ``recipe``)."""
    recipe, where = run.get("recipe"), _report(run)
    kind = run_status(run)
    if kind == "violation":
        return "failure", (f"violation: {', '.join(run.get('violations') or ()) or 'a forbidden anomaly'} "
                           f"under recipe {recipe}; report: {where}")
    if kind == "unknown":
        why = run.get("error") or _NOT_DONE.get(str(run.get("status")), "verdict unknown")
        return "error", f"recipe {recipe}: {why}"
    if kind == "permitted":
        return "passed", (f"demonstrated: lost {run.get('n_lost_write')} acknowledged writes under recipe "
                          f"{recipe}, permitted; report: {where}")
    if model_loses(run):
        return "skipped", (f"not demonstrated: the model loses data under recipe {recipe} on this config, "
                           f"and Kafka kept every write; report: {where}")
    return "passed", f"held: no loss under recipe {recipe}"


def _report(run: Mapping[str, Any]) -> str:
    """Where a run's report is: its ``report``, else its run and that it has none."""
    return str(run.get("report") or f"{run.get('run')} (no report.html)")


def _cases(cell: Mapping[str, Any], name: str) -> list[tuple[str, tuple[str, str]]]:
    """(name, outcome) of each test case of a cells row: its own, named ``name``, then its
    targeted runs'."""
    return [(name, outcome(cell)), *((f"{name} / {r['recipe']}", targeted_outcome(r))
                                     for r in cell.get("targeted") or ())]


def write_junit(path: Path, cells: Sequence[Mapping[str, Any]], suite: str = "faultline") -> Path:
    """Write ``cells`` (rows of the ``cells`` table, each with its ``targeted`` runs when it has
    some) as JUnit XML to ``path`` (atomically): one ``testsuite`` per sweep, one ``testcase``
    per cell (classname: the sweep, name: the cell's config as the comparison page names it,
    :func:`faultline.analysis.comparison.names`), then one per targeted run of it (name: the
    cell's and `` / <recipe>``). The names are unique in a suite: CI tools merge test cases of
    one name, so a failing one could hide behind a passing one."""
    root = ET.Element("testsuites", name=suite)
    by_sweep: dict[str, list[Mapping[str, Any]]] = {}
    for c in cells:
        by_sweep.setdefault(str(c["sweep"]), []).append(c)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for sweep, rows in by_sweep.items():
        ts = ET.SubElement(root, "testsuite", name=sweep)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        named = names(rows)
        for c in rows:
            for name, (kind, message) in _cases(c, named[config(c)]):
                case = ET.SubElement(ts, "testcase", classname=sweep, name=name)
                counts["tests"] += 1
                if kind == "passed":
                    if message:
                        ET.SubElement(case, "system-out").text = message
                    continue
                counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}[kind]] += 1
                ET.SubElement(case, kind, message=message).text = message
        for k, v in counts.items():
            ts.set(k, str(v))
            totals[k] += v
    for k, v in totals.items():
        root.set(k, str(v))
    ET.indent(root)
    return write_atomic(Path(path), ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n")


def exit_code(cells: Sequence[Mapping[str, Any]]) -> int:
    """1 when a cell or a targeted run has a violation, else 2 when one is unknown or failed,
    else 0 (a targeted run that did not demonstrate its loss is no error)."""
    kinds = {kind for c in cells for _, (kind, _) in _cases(c, "")}
    return 1 if "failure" in kinds else 2 if "error" in kinds else 0
