"""``faultline nightly --master spark://...`` for real: a Spark standalone master and one-core
workers on this machine (tests/spark_standalone.py: 127.0.0.1, authenticated), a two-cell
sweep of short runs through them, so two clusters at once, each in its own network
namespaces and /24. Mid-cell the worker of one cell is killed with its executor (a machine
lost): the cell runs again on the third worker and is recorded once, its first attempt set
aside, its cluster torn down. Each cell is a normal run directory made on a worker, and the
analysis (in the same Spark session) equals that of the same sweep run here. A sweep
directory the workers do not see is one line, exit 2, nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
import yaml

from faultline.analysis.sweepdir import read_sweep
from faultline.cluster.host import netns, runstate
from faultline.cluster.waiting import wait_until
from faultline.sweep.manifest import MANIFEST_FILE
from faultline.sweep.spark_cells import SET_ASIDE_DIR
from tests.schemas import validate_run_dir, validator
from tests.spark_standalone import Standalone, start, stop_leftovers

pytestmark = pytest.mark.integration
#: Short cells of one node: what is tested is where they run, not what Kafka does.
MATRIX = {
    "name": "it-spark-cells",
    "defaults": {"time_limit_s": 8, "kafka": {"nodes": 1, "heap_mb": 384},
                 "topic": {"replication_factor": 1, "min_insync_replicas": 1}, "workload": {"rate": 300}},
    "axes": {"acks": ["1", "all"]},
}
HERE, THERE = "2026-11-22", "2026-11-23"
#: The columns of the ``runs`` table that say a run's verdict and counts.
VERDICT = ("status", "valid", "error", "violations", "permitted", "unknown", "expected_loss")


def faultline(*args: str) -> list[str]:
    return [sys.executable, "-m", "faultline", *args]


@dataclass(frozen=True)
class Here:
    """The matrix, where the nights go, and the sweep of the earlier night, running here."""

    config: Path
    results: Path
    sweep: subprocess.Popen[str]  # its output in results/../here.log


@pytest.fixture(scope="module")
def here(local_backend: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Here]:
    """The sweep here starts first: the standalone cluster starts while it runs."""
    base = tmp_path_factory.mktemp("nights")
    config = base / "it-spark-cells.yaml"
    config.write_text(yaml.safe_dump(MATRIX))
    results = base / "results"
    with (base / "here.log").open("w") as log:
        sweep = subprocess.Popen(faultline("sweep", str(config), "--out",
                                           str(results / "nightly" / HERE / "sweep")),
                                 stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        yield Here(config, results, sweep)
    finally:
        if sweep.poll() is None:
            sweep.terminate()  # it tears its cell's cluster down
            sweep.wait(timeout=120)


@pytest.fixture(scope="module")
def spark(here: Here, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    stop_leftovers()  # a crashed session's
    cluster = start(tmp_path_factory.mktemp("spark") / "cluster", workers=3)  # two cells and a spare
    try:
        yield cluster
    finally:
        cluster.stop()


@dataclass(frozen=True)
class Nights:
    results: Path
    here: int  # the sweep here's exit status
    there: int  # the nightly's
    output: str  # both
    lost: str  # the cell whose worker was killed mid-run
    lost_run: str  # that attempt's run id
    killed: str  # that worker


def _cells_up() -> list[runstate.RunState]:
    """The runs of MATRIX's cells whose Kafka and Toxiproxy run."""
    return [s for s in runstate.load_all().values()
            if s is not None and s.spec.get("name") == MATRIX["name"] and len(s.processes()) >= 2]


def _ancestors(pid: int) -> set[int]:
    out = set()
    while pid > 1:
        out.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return out


@pytest.fixture(scope="module")
def nights(here: Here, spark: Standalone) -> Nights:
    """The same matrix swept here (an earlier night) and, as ``faultline nightly``, on the
    cluster, with one cell's worker killed once both cells' clusters run; the night's analysis
    covers both."""
    done_here = here.sweep.wait(timeout=600)
    config, results = here.config, here.results
    log = results.parent / "nightly.log"
    with log.open("w") as out:
        night = subprocess.Popen(faultline("nightly", str(config), "--master", spark.master,
                                           "--results", str(results), "--date", THERE),
                                 env=spark.driver_env(), stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        both = wait_until(lambda: len(_cells_up()) == 2 or night.poll() is not None, time.monotonic() + 300)
        assert both and night.poll() is None, f"the two cells' clusters never ran at once: {log.read_text()}"
        lost = _cells_up()[0]
        assert lost.owner is not None
        (worker,) = [name for name, proc in spark.daemons.items() if proc.pid in _ancestors(lost.owner.pid)]
        spark.kill(worker)
        # the cell's process tears its cluster down as its task's process ends
        assert wait_until(lambda: not runstate.run_dir(lost.run_id).exists(), time.monotonic() + 60), \
            f"the lost cell's cluster {lost.run_id} was not torn down"
        there = night.wait(timeout=900)
    finally:
        if night.poll() is None:
            night.kill()
    output = (results.parent / "here.log").read_text() + log.read_text()
    return Nights(results, done_here, there, output, f"acks={lost.spec['producer']['acks']}",
                  lost.run_id, worker)


def _sweep_dir(results: Path, night: str) -> Path:
    return results / "nightly" / night / "sweep"


def _sweep(results: Path, night: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((_sweep_dir(results, night) / MANIFEST_FILE).read_text())
    validator("sweep.schema.json").validate(data)
    return data


def test_a_sweep_directory_the_workers_do_not_see_is_one_line_exit_2_and_nothing_written(
        spark: Standalone, tmp_path: Path) -> None:
    """The driver alone sees a tmpfs mounted over ``hidden`` (a mount namespace of its own):
    the workers look into the empty directory beneath. First in the module: it runs while
    the sweep here does (no cell runs here)."""
    config = tmp_path / "m.yaml"
    config.write_text(yaml.safe_dump(MATRIX))
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    script = ('mount -t tmpfs -o size=16m faultline-test "$1" && "$2" -m faultline sweep "$3" --master "$4" '
              '--out "$1/sweep"; rc=$?; ls -A "$1"; exit $rc')
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                           str(hidden), sys.executable, str(config), spark.master],
                          env=spark.driver_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("faultline")]
    assert len(said) == 1 and "Traceback" not in done.stderr, done.stderr
    assert said[0].startswith(f"faultline: error: worker {os.uname().nodename} (executor ")
    assert said[0].endswith(f") does not see {hidden} as this machine does: the sweep directory must be on "
                            f"a filesystem every worker mounts at the same path")
    assert done.stdout == "", "the driver's view of the directory: nothing left in it"
    assert list(hidden.iterdir()) == []


def test_each_cell_ran_once_on_a_worker_into_a_normal_run_directory(spark: Standalone,
                                                                    nights: Nights) -> None:
    assert nights.there == 0, nights.output
    sweep = _sweep_dir(nights.results, THERE)
    cells = _sweep(nights.results, THERE)["cells"]
    assert sorted((c["id"], c["status"], c["valid"]) for c in cells) == [
        ("acks=1", "done", True), ("acks=all", "done", True)], nights.output
    night_app = max(p.name for p in spark.base.glob("worker*/app-*"))  # the latest application
    for cell in cells:
        ran = cell["ran_on"]
        assert ran["host"] == os.uname().nodename
        (executor,) = spark.base.glob(f"worker*/{night_app}/{ran['executor']}")
        assert executor.parent.parent.name != nights.killed, (cell, "ran on the lost worker")
        assert ran["attempt"] == (1 if cell["id"] == nights.lost else 0), cell
        run_dir = sweep / cell["run_dir"]
        found = validate_run_dir(run_dir)
        assert {"test.json", "results.json", "history.jsonl.zst", "cluster.json"} <= set(found), found
        assert (run_dir / "report.html").exists()
    (aside,) = (sweep / SET_ASIDE_DIR / nights.lost).iterdir()
    assert (aside / "test.json").exists(), "the lost attempt's partial run"
    assert sorted(p.name for p in (sweep / SET_ASIDE_DIR).iterdir()) == [nights.lost]


def test_the_lost_cells_cluster_left_nothing(nights: Nights) -> None:
    assert nights.lost_run not in runstate.run_ids()
    assert nights.lost_run not in {*netns.owned_namespaces().values(), *netns.owned_links().values()}
    assert nights.lost_run not in runstate.run_processes()


def test_the_analysis_equals_that_of_the_same_sweep_run_here(nights: Nights) -> None:
    assert nights.here == 0, nights.output
    ids = {}
    for night in (HERE, THERE):
        _sweep(nights.results, night)  # valid
        ids[night] = read_sweep(_sweep_dir(nights.results, night)).id
    runs = ds.dataset(nights.results / "nightly" / THERE / "analysis" / "tables" / "runs",
                      partitioning="hive").to_table().to_pylist()
    counts = [k for k in runs[0] if k.startswith("n_")]

    def verdicts(night: str) -> dict[str, tuple[Any, ...]]:
        return {r["cell"]: tuple(r[k] for k in (*VERDICT, *counts)) for r in runs if r["sweep"] == ids[night]}

    assert verdicts(THERE) == verdicts(HERE) and len(verdicts(HERE)) == 2, runs
    assert (nights.results / "nightly" / THERE / "analysis" / "junit.xml").exists()
