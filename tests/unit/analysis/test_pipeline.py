"""The pipeline's own writing of a table's partition (faultline/analysis/pipeline.py): the
directory named as Spark names it, the file written whole in row groups; a run's check and
its ``ops`` partition in one task."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from faultline.analysis import pipeline
from faultline.analysis.pipeline import partition_dir, write_partition
from faultline.analysis.rows import history_batches
from faultline.analysis.tables import observation_batches
from faultline.checkers.synthetic import Shape, generate
from faultline.errors import HistoryError
from faultline.spec import TestSpec

#: The directory Spark 4 writes for the partition p of every ASCII character but NUL, and "é".
SPARK_NAMED = ("p=%01%02%03%04%05%06%07%08%09%0A%0B%0C%0D%0E%0F%10%11%12%13%14%15%16%17%18%19%1A%1B"
               "%1C%1D%1E%1F !%22%23$%25&%27()%2A+,-.%2F0123456789%3A;<%3D>%3F@ABCDEFGHIJKLMNOPQRSTUVWXYZ"
               "%5B%5C%5D%5E_`abcdefghijklmnopqrstuvwxyz%7B|}~%7Fé")

SCHEMA = pa.schema([("x", pa.int64()), ("s", pa.string())])


def test_a_partition_directory_is_named_as_spark_names_it() -> None:
    value = "".join(map(chr, range(1, 128))) + "é"
    assert partition_dir(Path("t"), {"p": value}) == Path("t") / SPARK_NAMED
    assert partition_dir(Path("t"), {"sweep": "s-1", "run": "acks=1,seed=2"}) == (
        Path("t") / "sweep=s-1" / "run=acks%3D1,seed%3D2")


def batch(xs: range) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"x": list(xs), "s": [str(x) for x in xs]}, schema=SCHEMA)


def test_a_partition_is_one_file_of_row_groups_replaced_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "ROW_GROUP", 4)
    keys = {"sweep": "s", "run": "r"}
    batches = [batch(range(3)), batch(range(0)), batch(range(3, 10))]
    assert write_partition(tmp_path, keys, batches, SCHEMA) == 10
    (path,) = (tmp_path / "sweep=s" / "run=r").iterdir()
    assert pq.read_table(path).column("x").to_pylist() == list(range(10))
    assert pq.ParquetFile(path).metadata.num_row_groups == 3
    assert write_partition(tmp_path, keys, [batch(range(20, 22))], SCHEMA) == 2
    assert [pq.read_table(p).column("x").to_pylist() for p in (tmp_path / "sweep=s" / "run=r").iterdir()] == [
        [20, 21]]


def test_a_partition_is_zstd_with_statistics_for_its_scalars_alone(tmp_path: Path) -> None:
    write_partition(tmp_path, {"sweep": "s"}, [batch(range(3))], SCHEMA)
    (path,) = (tmp_path / "sweep=s").iterdir()
    group = pq.ParquetFile(path).metadata.row_group(0)
    x, s = group.column(0), group.column(1)
    assert (x.compression, s.compression) == ("ZSTD", "ZSTD")
    assert x.is_stats_set and (x.statistics.min, x.statistics.max) == (0, 2)
    assert not s.is_stats_set


def test_no_rows_write_no_partition(tmp_path: Path) -> None:
    assert write_partition(tmp_path, {"sweep": "s"}, [batch(range(0))], SCHEMA) == 0
    assert list(tmp_path.iterdir()) == []


def test_a_failure_midway_leaves_the_partition_as_it_was(tmp_path: Path) -> None:
    write_partition(tmp_path, {"sweep": "s"}, [batch(range(2))], SCHEMA)

    def failing() -> Iterator[pa.RecordBatch]:  # as a history found malformed midway
        yield batch(range(5))
        raise HistoryError("history.jsonl", 6, "not valid JSON")

    with pytest.raises(HistoryError):
        write_partition(tmp_path, {"sweep": "s"}, failing(), SCHEMA)
    (path,) = (tmp_path / "sweep=s").iterdir()
    assert pq.read_table(path).column("x").to_pylist() == [0, 1]


def stored_run(path: Path, data: bytes, observations: bytes | None = None) -> dict[str, str]:
    """A run directory of the default spec, the history ``data`` and the observations.jsonl
    ``observations`` (None: none), as a task's run."""
    path.mkdir()
    (path / "test.json").write_bytes(orjson.dumps(TestSpec().to_json()))
    (path / "history.jsonl").write_bytes(data)
    if observations is not None:
        (path / "observations.jsonl").write_bytes(observations)
    return {"sweep": "s", "run": "r", "run_dir": str(path)}


def check_and_ingest(out: Path, r: dict[str, str]) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                           list[dict[str, Any]]]:
    """The check's row of a run and its ``ops`` and ``observations`` partitions' rows, as the
    pipeline's task makes them."""
    (batch,) = pipeline._check_and_ingest({t: str(out / t) for t in ("ops", "observations")})(r)
    (row,) = batch.to_pylist()
    ops, observations = (out / t / "sweep=s" / "run=r" for t in ("ops", "observations"))
    return row, *(pq.read_table(p).to_pylist() if p.exists() else [] for p in (ops, observations))


JOURNAL = b"".join(orjson.dumps(r) + b"\n"
                   for r in generate(Shape(seed=2, values=500, fail=0.1, info=0.1, faults=3)))


@pytest.mark.parametrize("tail", [b"", b'{"index":', b'{"index": 9}\n'], ids=["whole", "cut", "refused"])
def test_one_task_checks_a_run_and_writes_its_ops_partition(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tail: bytes) -> None:
    """Whole or its last line cut (every row's history_truncated): read again by the
    compiled reader, as the check read it whole; or a line the check and the history's
    reader refuse (the check's error, no rows)."""
    data = JOURNAL + tail
    r = stored_run(tmp_path / "run", data)
    if tail.endswith(b"\n"):
        row, ops, _ = check_and_ingest(tmp_path, r)
        assert row["error"] and row["ops_rows"] == 0 and ops == []
        return
    with monkeypatch.context() as patch:
        patch.setattr(pipeline, "history_batches", None)  # the row reader: not for these
        row, ops, _ = check_and_ingest(tmp_path, r)
    assert row["valid"] != "unknown" or tail
    assert row["ops_rows"] == row["lines"] == len(ops) == data.count(b"\n")
    history = Path(r["run_dir"]) / "history.jsonl"
    assert ops == pa.Table.from_batches(list(history_batches(history))).to_pylist()
    assert all(o["history_truncated"] for o in ops) is bool(tail)


#: A run's observations.jsonl: two samples of the white box.
OBSERVATIONS = (b'{"time": 1, "topic": "fl-queue", "partition": 0, "leader": 1, "isr": [1, 2], "hw": 5}\n'
                b'{"time": 2, "topic": "fl-queue", "partition": 1, "replicas": [2, 3], "leo": {"2": 7}}\n')


@pytest.mark.parametrize("bad", [False, True])
def test_the_task_writes_a_runs_observations_partition(tmp_path: Path, bad: bool) -> None:
    """Its rows are the file's, as :func:`observation_batches` reads them; a file that
    cannot be read has none, and the run is checked and ingested all the same."""
    r = stored_run(tmp_path / "run", JOURNAL, b"{\n" + OBSERVATIONS if bad else OBSERVATIONS)
    row, ops, observations = check_and_ingest(tmp_path, r)
    assert row["ops_rows"] == len(ops) == JOURNAL.count(b"\n")
    if bad:
        assert observations == []
        return
    assert observations == pa.Table.from_batches(list(observation_batches(Path(r["run_dir"])))).to_pylist()
    assert [(o["partition"], o["hw"], o["replicas"]) for o in observations] == [
        (0, 5, None), (1, None, [2, 3])]
