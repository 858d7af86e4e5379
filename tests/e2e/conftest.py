"""Fixtures shared by the pipeline's end-to-end tests: one Spark session for the whole test
session (local[2], two shuffle partitions: the machine is small and shared), and two
nights of sweeps analyzed once by ``faultline analyze``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from faultline.cli import main
from faultline.report.page import build_report
from tests.analysis_sweeps import REAL_RUN, CellRun, acks_cells, make_sweep

SPARK_CONF = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from faultline.analysis.spark import session

    s = session("local[2]", conf=SPARK_CONF)
    yield s
    s.stop()


@dataclass(frozen=True, slots=True)
class Analyzed:
    """Two nights' sweep directories, what ``faultline analyze`` wrote for them, and its exit code."""

    nights: tuple[Path, Path]
    out: Path
    exit_code: int
    output: str


def night_cells() -> list[CellRun]:
    """Tonight: acks=all and acks=1 under kills, 2 seeds each (a violation; a permitted loss);
    the real run (kill + partition, no loss); a cell the sweep could not run."""
    real = {"producer.acks": "all", "nemesis.faults": ["kill", "partition"]}
    return [*acks_cells((3, 42)),
            CellRun("acks=all,faults=kill+partition,seed=3", {**real, "seed": 3}, source=REAL_RUN),
            CellRun("acks=all,faults=kill+partition,seed=4", {**real, "seed": 4}, status="failed",
                    error="the cluster did not come up")]


@pytest.fixture(scope="session")
def analyzed(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Analyzed:
    base = tmp_path_factory.mktemp("sweeps")
    last = make_sweep(base / "2026-11-22" / "sweep", "nightly", "2026-11-22T02:00:00Z", acks_cells((3,)))
    tonight = make_sweep(base / "2026-11-23" / "sweep", "nightly", "2026-11-23T02:00:00Z", night_cells())
    for run in (tonight / "cells").glob("acks=all,faults=kill,*"):  # the cell whose links are tested
        build_report(run)
    out = base / "analysis"
    result = CliRunner().invoke(main, ["analyze", str(last), str(tonight), "--out", str(out),
                                       "--master", "local[2]"])
    crash = "" if result.exception is None or isinstance(result.exception, SystemExit) else (
        "".join(__import__("traceback").format_exception(result.exception)))
    return Analyzed((last, tonight), out, result.exit_code, result.output + crash)
