"""A real sweep of two short cells, one per Kafka version (4.3.1 and 3.9.1, the second
version of a nightly sweep): each cell is a complete run directory, broker state
included, the manifest validates, and a rerun runs nothing again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from faultline.cli import main
from faultline.spec import DEFAULT_KAFKA_VERSION
from tests.schemas import validate_run_dir, validator

pytestmark = pytest.mark.integration
VERSIONS = [DEFAULT_KAFKA_VERSION, "3.9.1"]
MATRIX = {
    "name": "it-sweep",
    # a modest rate: the test validates every history line against its schema
    "defaults": {"time_limit_s": 10, "kafka": {"heap_mb": 384}, "workload": {"rate": 300},
                 "nemesis": {"faults": ["kill"], "interval_s": 4}},
    "axes": {"version": VERSIONS},
}


def sweep(matrix: Path, out: Path) -> Result:
    return CliRunner().invoke(main, ["sweep", str(matrix), "--out", str(out)])


@pytest.fixture(scope="module")
def swept(local_backend: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Result]:
    base = tmp_path_factory.mktemp("sweep")
    matrix = base / "it-sweep.yaml"
    matrix.write_text(yaml.safe_dump(MATRIX))
    return matrix, base / "out", sweep(matrix, base / "out")


def manifest(out: Path) -> dict[str, object]:
    data = json.loads((out / "sweep.json").read_text())
    validator("sweep.schema.json").validate(data)
    return data


def test_every_cell_is_a_run_directory_with_what_its_cluster_was(swept: tuple[Path, Path, Result]) -> None:
    _, out, result = swept
    data = manifest(out)
    cells = data["cells"]
    assert isinstance(cells, list)
    assert [(c["id"], c["status"], c["error"]) for c in cells] == \
        [(f"version={v}", "done", None) for v in VERSIONS], result.output
    codes = {True: 0, False: 1, "unknown": 2}
    assert result.exit_code == max(codes[c["valid"]] for c in cells), result.output
    for cell, version in zip(cells, VERSIONS, strict=True):
        run_dir = out / cell["run_dir"]
        found = validate_run_dir(run_dir)
        assert {"test.json", "results.json", "history.jsonl.zst", "metadata.jsonl", "replicas.jsonl",
                "cluster.json"} <= set(found), (version, found)
        assert json.loads((run_dir / "test.json").read_text())["kafka"]["version"] == version
        assert json.loads((run_dir / "results.json").read_text())["valid"] == cell["valid"]
        facts = json.loads((run_dir / "cluster.json").read_text())
        assert facts["kafka_version"] == version
        assert facts["features"].get("metadata.version", 0) > 0, facts
        old = version.startswith("3.")
        assert facts["dump_log_segments"] == ("kafka.tools.DumpLogSegments" if old
                                              else "org.apache.kafka.tools.DumpLogSegments")
        assert facts["eligible_leader_replicas"] is (not old), facts
        assert (run_dir / "report.html").exists()
    assert yaml.safe_load((out / "matrix.yaml").read_text()) == MATRIX


def test_a_rerun_skips_the_done_cells(swept: tuple[Path, Path, Result]) -> None:
    matrix, out, first = swept
    before = manifest(out)
    results = {p: p.stat().st_mtime_ns for p in out.glob("cells/*/results.json")}
    again = sweep(matrix, out)
    assert again.exit_code == first.exit_code, again.output
    assert "2 cells, 0 to run" in again.output, again.output
    assert manifest(out) == before
    assert {p: p.stat().st_mtime_ns for p in out.glob("cells/*/results.json")} == results
    assert len(results) == 2
