"""``faultline analyze`` end to end on two nights of sweep directories made of stored runs
(tests/analysis_sweeps.py): the Parquet tables (read back with pyarrow, not Spark), the
checker on Spark's executors against ``faultline check``, the per-cell aggregates, the
JUnit XML and the exit code."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import orjson
import pyarrow.dataset as ds
import pytest

from faultline.analysis.aggregate import wilson
from faultline.analysis.rows import to_history_row
from faultline.checkers.stored import check_stored
from faultline.history import iter_rows
from tests.e2e.conftest import Analyzed

pytestmark = pytest.mark.e2e


def table(a: Analyzed, name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = ds.dataset(a.out / "tables" / name, format="parquet",
                                            partitioning="hive").to_table().to_pylist()
    return rows


def test_the_command_ran_and_says_a_cell_violates(analyzed: Analyzed) -> None:
    assert analyzed.exit_code == 1, analyzed.output
    assert "comparison:" in analyzed.output
    spent = re.search(r"the check itself ([0-9.]+) CPU-s on the executors", analyzed.output)
    assert spent is not None and float(spent.group(1)) > 0, analyzed.output


def test_the_spark_check_gives_what_faultline_check_gives(analyzed: Analyzed) -> None:
    """Every done run, the simulated ones with a lost write and the real one, checked on an
    executor from the ops table, against check_stored on its files."""
    runs = [r for r in table(analyzed, "runs") if r["status"] == "done"]
    assert len(runs) == 7
    lost = 0
    for r in runs:
        ours = orjson.loads(r["results_json"])
        theirs = orjson.loads(orjson.dumps(check_stored(Path(r["run_dir"])).to_json()))
        assert ours == theirs, r["run"]
        lost += ours["anomaly_counts"]["lost-write"]
    assert lost >= 4


def test_ops_holds_every_history_line_typed(analyzed: Analyzed) -> None:
    ops = table(analyzed, "ops")
    runs = [r for r in table(analyzed, "runs") if r["status"] == "done"]
    for r in runs:
        mine = sorted((o for o in ops if o["sweep"] == r["sweep"] and o["run"] == r["run"]),
                      key=lambda o: o["index"])
        rows = list(iter_rows(Path(r["run_dir"]) / "history.jsonl"))
        assert [to_history_row(o) for o in mine] == rows


def test_runs_faults_anomalies_observations(analyzed: Analyzed) -> None:
    runs = {r["run"]: r for r in table(analyzed, "runs") if r["sweep"].endswith("20261123T020000Z")}
    assert len(runs) == 6
    real = runs["acks=all,faults=kill+partition,seed=3"]
    stored = json.loads((analyzed.nights[1] / "cells" / real["run"] / "results.json").read_text())
    assert (real["producer_acks"], real["topic_min_insync_replicas"], real["nemesis_faults"]) == (
        "all", 2, "kill+partition")
    assert real["sends_ok"] == stored["stats"]["send"]["ok"]
    assert real["valid"] == "true" and real["expected_loss"] == "forbidden"
    violating = runs["acks=all,faults=kill,seed=3"]
    assert "lost-write" in violating["violations"] and violating["n_lost_write"] == 1
    assert runs["acks=1,faults=kill,seed=3"]["expected_loss"] == "permitted"
    failed = runs["acks=all,faults=kill+partition,seed=4"]
    assert (failed["status"], failed["error"]) == ("failed", "the cluster did not come up")

    anomalies = [a for a in table(analyzed, "anomalies") if a["run"] == violating["run"]
                 and a["sweep"] == violating["sweep"]]
    results = json.loads(violating["results_json"])
    assert len(anomalies) == sum(len(v) for v in results["anomalies"].values())
    lost = [a for a in anomalies if a["type"] == "lost-write"]
    assert lost and all(a["violation"] for a in lost)

    faults = [f for f in table(analyzed, "faults") if f["run"] == real["run"] and f["sweep"] == real["sweep"]]
    assert [(f["f"], f["nodes"]) for f in faults] == [
        (w["f"], [str(n) for n in w["nodes"]]) for w in stored["measures"]["faults"]]
    observations = [o for o in table(analyzed, "observations") if o["run"] == real["run"]
                    and o["sweep"] == real["sweep"]]
    lines = (analyzed.nights[1] / "cells" / real["run"] / "observations.jsonl").read_text().splitlines()
    assert len(observations) == len(lines)


def test_cells_aggregate_across_seeds_and_nights(analyzed: Analyzed) -> None:
    cells = table(analyzed, "cells")
    now = {c["cell"]: c for c in cells if c["sweep"].endswith("20261123T020000Z")}
    before = {c["cell"]: c for c in cells if c["sweep"].endswith("20261122T020000Z")}
    bad = now["nemesis.faults=kill,producer.acks=all"]
    assert (bad["runs"], bad["runs_lost"], bad["lost_sum"], bad["runs_violating"]) == (2, 2, 2, 2)
    lo, hi = wilson(2, 2)
    assert bad["p_loss"] == 1.0 and bad["p_loss_low"] == pytest.approx(lo)
    assert bad["p_loss_high"] == pytest.approx(min(hi, 1.0))
    ok = now["nemesis.faults=kill,producer.acks=1"]
    assert (ok["runs_lost"], ok["runs_violating"], ok["violations"]) == (2, 0, [])
    real = now["nemesis.faults=kill+partition,producer.acks=all"]
    assert (real["runs"], real["runs_failed"], real["runs_lost"]) == (1, 1, 0)
    assert real["p99_ms"] > real["p50_ms"] > 0 and real["acked_per_s"] > 0
    (run,) = [r for r in table(analyzed, "runs") if r["sweep"] == real["sweep"] and r["cell"] == real["cell"]
              and r["status"] == "done"]
    assert (real["p50_ms"], real["p99_ms"]) == (run["p50_ms"], run["p99_ms"]), "one run's sends: its figures"
    assert before["nemesis.faults=kill,producer.acks=all"]["runs"] == 1
    assert set(before) == {"nemesis.faults=kill,producer.acks=all", "nemesis.faults=kill,producer.acks=1"}


def test_junit_has_a_case_per_cell_of_tonight(analyzed: Analyzed) -> None:
    root = ET.parse(analyzed.out / "junit.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert set(cases) == {"nemesis.faults=kill,producer.acks=all", "nemesis.faults=kill,producer.acks=1",
                          "nemesis.faults=kill+partition,producer.acks=all"}
    failure = cases["nemesis.faults=kill,producer.acks=all"].find("failure")
    assert failure is not None and "lost-write" in failure.get("message", "")
    report = failure.get("message", "").split("report: ")[1]
    assert Path(report).name == "report.html" and Path(report).exists()
    assert list(cases["nemesis.faults=kill,producer.acks=1"]) == []
    error = cases["nemesis.faults=kill+partition,producer.acks=all"].find("error")
    assert error is not None and "the cluster did not come up" in error.get("message", "")
