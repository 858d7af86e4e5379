"""Cells on a Spark cluster, without one (the cluster is the integration test's): the master's
URL, what refuses a worker, Spark's errors in one line, the driver recording each cell's end
once, a task setting aside what an earlier attempt left, and the doctor's worker line."""

from __future__ import annotations

import io
import os
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from rich.console import Console

from faultline.cli import main
from faultline.errors import HistoryError, SetupError, SpecError
from faultline.sweep import runner, spark_cells
from faultline.sweep.manifest import CellState, RanOn, load
from faultline.sweep.matrix import Cell
from faultline.sweep.runner import Ending
from faultline.sweep.spark_cells import Executor, Facts
from tests.unit.sweep.test_runner import FakeRuns, matrix, statuses


@pytest.mark.parametrize(("url", "addresses"), [
    ("spark://h:7077", [("h", 7077)]),
    ("spark://a:7077,b:7078/", [("a", 7077), ("b", 7078)]),
    ("spark://[::1]:7077", [("::1", 7077)]),
])
def test_a_standalone_master_url_names_its_addresses(url: str, addresses: list[tuple[str, int]]) -> None:
    assert spark_cells.master_addresses(url) == addresses


@pytest.mark.parametrize("url", ["local[2]", "yarn", "spark://", "spark://h", "spark://h:0",
                                 "spark://h:70000", "spark://h:7077,", "sc://h:15002"])
def test_another_url_is_one_line(url: str) -> None:
    with pytest.raises(SpecError, match=r"^--master .*: cells run on a Spark standalone cluster, "
                                        r"spark://HOST:PORT$"):
        spark_cells.master_addresses(url)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_master_that_does_not_answer_is_one_line() -> None:
    port = _closed_port()
    with pytest.raises(SetupError, match=rf"^the Spark master spark://127.0.0.1:{port} does not answer "
                                         rf"\(127.0.0.1:{port}: Connection refused\); "
                                         rf"start it, or fix --master$"):
        spark_cells.reach(f"spark://127.0.0.1:{port}")
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        spark_cells.reach(f"spark://127.0.0.1:{port},127.0.0.1:{listening.getsockname()[1]}")


@pytest.mark.parametrize("command", ["sweep", "nightly"])
def test_an_unreachable_master_is_one_line_exit_2_and_nothing_written(tmp_path: Path, command: str) -> None:
    config = tmp_path / "m.yaml"
    config.write_text("name: t\naxes: {acks: ['1', all]}\n")
    out = tmp_path / "out"
    where = ["--out", str(out)] if command == "sweep" else ["--results", str(out)]
    result = CliRunner().invoke(main, [command, str(config), "--master", f"spark://127.0.0.1:{_closed_port()}",
                                       *where])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "does not answer" in result.output, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.yaml"]


def test_sweep_refuses_a_master_other_than_a_standalone_one_before_reading_the_matrix(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("axes: [")
    result = CliRunner().invoke(main, ["sweep", str(tmp_path / "bad.yaml"), "--master", "local[2]"])
    assert result.exit_code == 2
    assert "cells run on a Spark standalone cluster" in result.output and result.output.count("\n") == 1


@pytest.mark.parametrize(("cores", "each"), [([1, 1], 1), ([4, 4, 4], 4), ([3, 4], 3), ([4, 7], 4)])
def test_a_cell_asks_for_the_smallest_executors_cores(cores: list[int], each: int) -> None:
    assert spark_cells.cores_per_cell([Executor(f"h{i}", c) for i, c in enumerate(cores)]) == each


def test_an_executor_that_could_hold_two_cells_is_refused() -> None:
    with pytest.raises(SetupError, match=r"differ in size \(h1 8 cores, h0 4\): one cell per worker"):
        spark_cells.cores_per_cell([Executor("h0", 4), Executor("h1", 8)])


GOOD = Facts("h", "3", 0, "0.1.0+abc", True, None)


@pytest.mark.parametrize(("facts", "says"), [
    (Facts("h", "3", 0, "0.1.0+abc", False, None),
     "worker h (executor 3) does not see /s as this machine does: the sweep directory must be on a "
     "filesystem every worker mounts at the same path"),
    (Facts("h", "3", 0, "0.1.0+abc", True, "Read-only file system"),
     "worker h (executor 3) cannot write /s: Read-only file system"),
    (Facts("h", "3", 1000, "0.1.0+abc", True, None),
     "worker h (executor 3) runs as uid 1000: cells need root; start its Spark worker as root"),
    (Facts("h", "3", 0, "0.1.0+def", True, None),
     "worker h (executor 3) runs faultline 0.1.0+def, this machine 0.1.0+abc: install the same "
     "faultline on every machine (faultline doctor prints it)"),
])
def test_each_reason_a_worker_cannot_run_cells_is_one_line(facts: Facts, says: str) -> None:
    assert spark_cells.refusal(GOOD, Path("/s"), "0.1.0+abc") is None
    assert spark_cells.refusal(facts, Path("/s"), "0.1.0+abc") == says


def test_the_build_changes_with_any_file_of_the_package(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "sub" / "data.json").write_text("{}")
    first = spark_cells.build(tmp_path)
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "x.pyc").write_bytes(b"compiled")
    assert spark_cells.build(tmp_path) == first
    (tmp_path / "sub" / "data.json").write_text("{ }")
    assert spark_cells.build(tmp_path) != first
    version = spark_cells.build().split("+")[0]
    assert spark_cells.build(tmp_path).split("+")[0] == first.split("+")[0] == version


SPARK_ERROR = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed 4 times, \
most recent failure: Lost task 0.3 in stage 1.0 (TID 4) (127.0.0.1 executor 0): \
org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was thrown from the Python \
worker: Traceback (most recent call last):
  File "/x/pyspark/worker.py", line 4197, in invoke_udf
    func, profiler, deserializer, serializer = read_command(pickleSer, init_info.udf_info)
faultline.errors.SetupError: vm does not see /s/sweep.json
 SQLSTATE: 38000
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:1)
"""


@pytest.mark.parametrize(("text", "line"), [
    (SPARK_ERROR, "faultline.errors.SetupError: vm does not see /s/sweep.json"),
    ("An error occurred while calling o1.collect.\n: org.apache.spark.SparkException: Job aborted due "
     "to stage failure: ExecutorLostFailure (executor 1 exited)\n\tat x.y(Z.scala:1)",
     "Job aborted due to stage failure: ExecutorLostFailure (executor 1 exited)"),
    ("  \n", "Exception"),
])
def test_sparks_error_is_cut_to_its_cause(text: str, line: str) -> None:
    assert spark_cells.failure(Exception(text)) == line


class FakeWorkers:
    """Stands in for SparkCells: runs each cell with ``fake`` in reverse order (results come
    back in any order), as executor "e<i>", and records what the sweep directory held then."""

    slots = 2

    def __init__(self, fake: FakeRuns, fail: int | None = None) -> None:
        self.fake, self.fail = fake, fail
        self.seen_dirs: list[list[str]] = []

    def check(self, sweep_dir: Path) -> None:
        raise AssertionError("run_sweep does not check")

    def run(self, cells: Sequence[tuple[Cell, CellState]], sweep_dir: Path,
            ended: Callable[[CellState, float], None]) -> None:
        self.seen_dirs.append(sorted(p.name for p in (sweep_dir / "cells").iterdir()))
        for i, (cell, state) in enumerate(reversed(cells)):
            if i == self.fail:
                runner.record(state, Ending("failed", error="Spark gave up on the cell's task: lost"))
            else:
                runner.record(state, runner.run_once(cell.spec, sweep_dir / state.run_dir, self.fake))
                state.started, state.ran_on = state.ended, RanOn("h", f"e{i}", 0)
            ended(state, 1.0)


def test_the_driver_records_each_cells_end_once_where_it_ran(tmp_path: Path) -> None:
    m = matrix()
    ids = [c.id for c in m.cells]
    runner.run_sweep(m, tmp_path, runner.prepare(m, tmp_path), console=Console(file=io.StringIO()),
                     run_cell=FakeRuns({0: "raise", 1: "raise", 3: "raise"}))
    (tmp_path / "cells" / ids[1] / "left-over").write_text("from the failed attempt")
    workers = FakeWorkers(FakeRuns({1: False}), fail=2)
    manifest = runner.run_sweep(m, tmp_path, runner.prepare(m, tmp_path),
                                console=Console(file=io.StringIO()), workers=workers)
    assert workers.seen_dirs == [[ids[2]]]  # the failed attempts' directories are gone
    assert workers.fake.ran == [ids[3], ids[1]]
    assert statuses(tmp_path) == [("failed", None, "Spark gave up on the cell's task: lost"),
                                  ("done", False, None), ("done", True, None), ("done", True, None)]
    assert [c.ran_on for c in load(tmp_path).cells] == [
        None, RanOn("h", "e1", 0), None, RanOn("h", "e0", 0)]
    assert manifest.exit_code == 2


def test_ran_on_round_trips_and_a_broken_one_is_one_line(tmp_path: Path) -> None:
    m = matrix()
    manifest = runner.prepare(m, tmp_path)
    manifest.cells[0].ran_on = RanOn("h", "1", 2)
    tmp_path.mkdir(exist_ok=True)
    manifest.save(tmp_path)
    assert load(tmp_path).cells[0].ran_on == RanOn("h", "1", 2)
    data = orjson.loads((tmp_path / "sweep.json").read_bytes())
    data["cells"][0]["ran_on"] = {"host": "h", "executor": 1, "attempt": 0}
    (tmp_path / "sweep.json").write_bytes(orjson.dumps(data))
    with pytest.raises(HistoryError, match=r"sweep.json: not a sweep manifest \(at ran_on\)"):
        load(tmp_path)
    del data["cells"][0]["ran_on"]  # a manifest written before there was ran_on
    (tmp_path / "sweep.json").write_bytes(orjson.dumps(data))
    assert load(tmp_path).cells[0].ran_on is None


def _task(tmp_path: Path, cell: Cell) -> dict[str, object]:
    return {"id": cell.id, "spec": cell.spec.to_json(), "sweep_dir": str(tmp_path),
            "run_dir": f"cells/{cell.id}"}


def test_a_task_sets_aside_what_an_earlier_attempt_left_and_runs_the_cell(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cell = matrix().cells[0]
    fake = FakeRuns()
    monkeypatch.setattr(spark_cells, "run_isolated", lambda spec, *, console=None, run_dir=None, target=None:
                        fake(spec, console=console, run_dir=run_dir))
    (tmp_path / "sweep.json").write_text("{}")
    left = tmp_path / "cells" / cell.id
    left.mkdir(parents=True)
    (left / "history.jsonl.zst").write_text("the lost attempt's")
    (ended,) = spark_cells._cell_task([_task(tmp_path, cell)])
    (aside,) = (tmp_path / "set-aside" / cell.id).iterdir()
    assert (aside / "history.jsonl.zst").read_text() == "the lost attempt's"
    assert fake.ran == [cell.id] and (left / "results.json").exists()
    assert ended.ending == Ending("done", True)
    assert ended.ran_on == RanOn(socket.gethostname(), Path.cwd().name, 0)
    assert ended.started <= ended.ended


def test_a_task_whose_worker_does_not_see_the_sweep_fails(tmp_path: Path) -> None:
    with pytest.raises(SetupError, match=rf"does not see {tmp_path}/sweep.json"):
        list(spark_cells._cell_task([_task(tmp_path, matrix().cells[0])]))
    assert list(tmp_path.iterdir()) == []


def _proc(tmp_path: Path, workers: dict[int, int]) -> Path:
    """A stand-in for /proc: a Spark worker per pid, its directory owned by the uid given."""
    for pid, uid in workers.items():
        (tmp_path / str(pid)).mkdir(parents=True)
        (tmp_path / str(pid) / "cmdline").write_bytes(b"java\0-cp\0x\0" + spark_cells.WORKER_CLASS.encode())
        os.chown(tmp_path / str(pid), uid, uid)
    (tmp_path / "9").mkdir(parents=True)
    (tmp_path / "9" / "cmdline").write_bytes(b"python\0-m\0faultline")
    (tmp_path / "self").mkdir()
    return tmp_path


def test_the_doctor_says_whether_this_machine_runs_cells_as_a_spark_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("the workers' processes are stood in for by directories owned by root and nobody")
    monkeypatch.setattr(spark_cells, "build", lambda: "0.1.0+abc")
    shared = f"a driver needs faultline 0.1.0+abc at {sys.executable}"
    none = spark_cells.worker_check(_proc(tmp_path / "a", {}))
    assert none.ok and none.detail == f"none runs here; where one does, {shared}"
    root = spark_cells.worker_check(_proc(tmp_path / "b", {41: 0, 40: 0}))
    assert root.ok and root.detail == f"pid 40, 41 as root; {shared}"
    nobody = spark_cells.worker_check(_proc(tmp_path / "c", {41: 0, 42: 65534}))
    assert (nobody.ok, nobody.detail, nobody.fix) == (
        False, "pid 42 runs as uid 65534; cells need root", "start the Spark worker as root")
