"""``faultline nightly`` for real (and so ``faultline sweep``, which it runs): a matrix of
two cells (acks=1 on Kafka 4.3.1 and on 3.9.1, the second version of a nightly sweep) of short runs
on real clusters, each cell a complete run directory, broker state included; then the
Spark pipeline, comparison.html and junit.xml; a rerun of the same night runs no cell
again and analyzes the same runs."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow.dataset as ds
import pytest
import yaml
from click.testing import CliRunner, Result

from faultline.cli import main
from faultline.spec import DEFAULT_KAFKA_VERSION
from tests.schemas import validate_run_dir, validator

pytestmark = pytest.mark.integration
NIGHT = "2026-11-23"
VERSIONS = [DEFAULT_KAFKA_VERSION, "3.9.1"]
MATRIX = {
    "name": "it-nightly",
    # short cells at a modest rate: the test validates every history line against its schema,
    # and asserts what a night makes of its cells, not what the kills did
    "defaults": {"time_limit_s": 5, "kafka": {"heap_mb": 384}, "workload": {"rate": 300},
                 "producer": {"acks": "1"},
                 "nemesis": {"faults": ["kill"], "interval_s": 2.5}},
    "axes": {"version": VERSIONS},
}


def nightly(config: Path, results: Path) -> Result:
    return CliRunner().invoke(main, ["nightly", str(config), "--results", str(results),
                                     "--date", NIGHT, "--master", "local[2]"])


@pytest.fixture(scope="module")
def night(local_backend: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Result]:
    base = tmp_path_factory.mktemp("nightly")
    config = base / "it-nightly.yaml"
    config.write_text(yaml.safe_dump(MATRIX))
    return config, base / "results", nightly(config, base / "results")


def manifest(sweep: Path) -> dict[str, object]:
    data = json.loads((sweep / "sweep.json").read_text())
    validator("sweep.schema.json").validate(data)
    return data


def test_every_cell_is_a_run_directory_with_what_its_cluster_was(night: tuple[Path, Path, Result]) -> None:
    _, results, result = night
    sweep = results / "nightly" / NIGHT / "sweep"
    cells = manifest(sweep)["cells"]
    assert isinstance(cells, list)
    assert sorted((c["id"], c["status"], c["error"]) for c in cells) == sorted(
        (f"version={v}", "done", None) for v in VERSIONS), result.output
    for cell in cells:
        run_dir = sweep / cell["run_dir"]
        found = validate_run_dir(run_dir)
        assert {"test.json", "results.json", "history.jsonl.zst", "metadata.jsonl",
                "replicas.jsonl", "cluster.json"} <= set(found), (cell["id"], found)
        assert (run_dir / "report.html").exists()
        version = json.loads((run_dir / "test.json").read_text())["kafka"]["version"]
        facts = json.loads((run_dir / "cluster.json").read_text())
        assert facts["kafka_version"] == version and cell["id"].endswith(f"version={version}")
        old = version.startswith("3.")
        assert facts["dump_log_segments"] == ("kafka.tools.DumpLogSegments" if old
                                              else "org.apache.kafka.tools.DumpLogSegments")
        assert facts["eligible_leader_replicas"] is (not old), facts
        assert json.loads((run_dir / "results.json").read_text())["valid"] == cell["valid"]
    assert yaml.safe_load((sweep / "matrix.yaml").read_text()) == MATRIX


def test_the_analysis_has_the_tables_the_page_and_a_test_case_per_cell(
        night: tuple[Path, Path, Result]) -> None:
    _, results, result = night
    analysis = results / "nightly" / NIGHT / "analysis"
    runs = ds.dataset(analysis / "tables" / "runs", format="parquet",
                      partitioning="hive").to_table().to_pylist()
    sweep = results / "nightly" / NIGHT / "sweep"
    cells = {c["id"]: c for c in manifest(sweep)["cells"]}  # type: ignore[union-attr]
    assert sorted(r["run"] for r in runs) == sorted(cells)
    for r in runs:
        assert r["valid"] == json.dumps(cells[r["run"]]["valid"]).strip('"'), r["run"]
    page = (analysis / "comparison.html").read_text()
    assert all(f"cells/{c}/report.html" in page for c in cells)
    cases = ET.parse(analysis / "junit.xml").getroot().findall(".//testcase")
    assert len(cases) == len(VERSIONS)
    failed = [c for c in cases if c.find("failure") is not None]
    errors = [c for c in cases if c.find("error") is not None]
    expected = 1 if failed else 2 if errors else 0
    assert result.exit_code == expected, result.output
    assert f"comparison: {analysis / 'comparison.html'}" in result.output


def test_a_rerun_of_the_night_runs_no_cell_again(night: tuple[Path, Path, Result]) -> None:
    config, results, first = night
    sweep = results / "nightly" / NIGHT / "sweep"
    before = manifest(sweep)
    stamps = {p: p.stat().st_mtime_ns for p in sweep.glob("cells/*/results.json")}
    again = nightly(config, results)
    assert again.exit_code == first.exit_code, again.output
    assert f"{len(VERSIONS)} cells, 0 to run" in again.output, again.output
    assert manifest(sweep) == before
    assert {p: p.stat().st_mtime_ns for p in sweep.glob("cells/*/results.json")} == stamps
    assert len(stamps) == len(VERSIONS)
