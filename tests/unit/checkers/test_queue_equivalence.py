"""The queue checker's engine against its previous version (reference_queue.py), kept
as a reference until the new one is proven: identical results.json objects, examples
and stories included, on the stored real run and on generated histories, correct or
mutated, with values the workload writes (0, 1, 2, ...) and values it never would
(negative, far apart, the int32 cells' own marks), which take the engine's other path,
offsets and processes the int32 cells cannot hold (negative, far out), invoke times
seconds apart (beyond the int32 cells of their differences), columns that
grow one slot at a time, and decisions taken a few sends and offsets at a time (so
across many blocks)."""

from __future__ import annotations

import copy
import random
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from faultline.checkers import columns, queue
from faultline.checkers.synthetic import Shape, generate
from faultline.checkers.whitebox import BrokerFiles, partition_timeline
from faultline.history import HistoryFile, ReadResult, iter_rows
from faultline.spec import MAX_TIME_LIMIT_S, TestSpec
from tests.unit.checkers import reference_queue
from tests.unit.checkers.queue_hist import make_spec
from tests.unit.checkers.test_queue_properties import MUTATIONS, Index, shapes

STORED = Path(__file__).parents[2] / "e2e" / "data" / "kill-partition"
Rows = list[dict[str, Any]]


def both(spec: TestSpec, rows: Rows, **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The engine's results.json object and the reference's, for ``rows``; and the
    engine's the same from the rows' file, read by its own reader (the compiled scanner,
    :meth:`queue.Engine.feed_file`) as by :func:`iter_rows`, compressed or not."""
    new = queue.check_rows(spec, rows, **kw).to_json()
    state = queue.BrokerState(kw.get("timeline"), kw.get("replicas"))
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as tmp:
        for compressed in (False, True):
            path = Path(tmp) / ("history.jsonl.zst" if compressed else "history.jsonl")
            write_history(path, rows, compressed)
            read = ReadResult()
            from_file = queue.check_rows_table(spec, HistoryFile(str(path), read),
                                               broker=lambda: state, table=False)[0]
            assert from_file.to_json() == new and read.lines == len(rows)
    return new, reference_queue.check_rows(spec, rows, **kw).to_json()


def write_history(path: Path, rows: Rows, compressed: bool) -> None:
    """``rows`` as a history file, plain or as zstd frames of a few lines each."""
    lines = [orjson.dumps(r) + b"\n" for r in rows]
    if not compressed:
        path.write_bytes(b"".join(lines))
        return
    zstd = zstandard.ZstdCompressor()
    path.write_bytes(b"".join(zstd.compress(b"".join(lines[i:i + 7])) for i in range(0, len(lines), 7)))


def test_the_stored_real_run_checks_the_same() -> None:
    spec = TestSpec.load(STORED / "test.json")
    files = BrokerFiles.read(STORED)
    read = ReadResult()
    rows = list(iter_rows(STORED, read))
    kw = {"truncated": read, "timeline": partition_timeline(files.metadata, spec.topic.name),
          "replicas": files.replicas}
    new, old = both(spec, rows, **kw)
    assert new == old and new["stats"]["send"]["ok"] > 0


def reoffset(rows: Rows, shift: int) -> None:
    """Add ``shift`` to every offset: acks (those given), polls, drains, HW and log start.
    Offsets past the arrays' reach (or negative) go to the maps' dicts."""
    for r in rows:
        v = r["value"]
        if r["f"] == "send" and r["type"] == "ok" and v.get("offset", -1) >= 0:
            v["offset"] += shift
        elif r["f"] == "poll" and r["type"] == "ok":
            v["records"] = [[t, p, o + shift, x] for t, p, o, x in v["records"]]
        elif r["f"] == "drain" and r["type"] == "ok":
            v["records"] = [[o + shift, x] for o, x in v["records"]]
            for k in ("high_watermark", "log_start_offset"):
                if isinstance(v.get(k), int):
                    v[k] += shift


def shuffle_drains(rows: Rows, seed: int) -> None:
    """Shuffle the drained values among each partition's drained offsets: reorderings,
    wrong acks and phantom reads by the hundred."""
    by_part: dict[int, list[list[int]]] = {}
    for r in rows:
        if r["f"] == "drain" and r["type"] == "ok":
            by_part.setdefault(r["value"]["partition"], []).extend(r["value"]["records"])
    rng = random.Random(seed)
    for records in by_part.values():
        values = [x for _, x in records]
        rng.shuffle(values)
        for rec, x in zip(records, values, strict=True):
            rec[1] = x


def reprocess(rows: Rows, shift: int) -> None:
    """Add ``shift`` to every client process."""
    for r in rows:
        if isinstance(r["process"], int):
            r["process"] += shift


def revalue(rows: Rows, shift: int, spread: int) -> None:
    """Give every value ``value * spread + shift``, in sends and reads alike."""
    def f(v: int) -> int:
        return v * spread + shift

    for r in rows:
        v = r["value"]
        if r["f"] == "send":
            v["value"] = f(v["value"])
        elif r["f"] == "poll" and r["type"] == "ok":
            v["records"] = [[t, p, o, f(x)] for t, p, o, x in v["records"]]
        elif r["f"] == "drain" and r["type"] == "ok":
            v["records"] = [[o, f(x)] for o, x in v["records"]]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(shape=shapes, data=st.data(), acks=st.sampled_from(["all", "1", "0"]),
       shift=st.sampled_from([0, 0, -(10**6), 2**40, columns.EMPTY]),
       spread=st.sampled_from([1, 1, 3, 2**21]), offsets=st.sampled_from([0, 0, -50, 2**30, 2**40]),
       shuffle=st.sampled_from([None, None, 1, 2]), processes=st.sampled_from([0, 0, 2**40]),
       stretch=st.sampled_from([1, 1, 10**6]),
       mutations=st.lists(st.sampled_from(sorted(MUTATIONS)), max_size=3))
def test_generated_histories_check_the_same(shape: Shape, data: st.DataObject, acks: str, shift: int,
                                            spread: int, offsets: int, shuffle: int | None,
                                            processes: int, stretch: int, mutations: list[str]) -> None:
    grow = data.draw(st.sampled_from([1, 7, queue.GROW]), "how the columns grow")
    block = data.draw(st.sampled_from([1, 7, 1 << 20]), "how many sends and offsets decide at once")
    rows = copy.deepcopy(list(generate(shape)))
    for name in mutations:
        ix = Index(rows)
        if ix.polls:
            MUTATIONS[name][0](ix, data)
    if shuffle is not None:
        shuffle_drains(rows, shuffle)
    revalue(rows, shift, spread)
    reoffset(rows, offsets)
    reprocess(rows, processes)
    for r in rows:  # times seconds apart (within the longest test's): beyond the int32 cells of invoke times
        r["time"] *= stretch
    note(f"{shape}, acks={acks}, values * {spread} + {shift}, offsets + {offsets}, "
         f"processes + {processes}, times * {stretch}, "
         f"drains shuffled by seed {shuffle}, mutations {mutations}")
    default = queue.GROW, columns.BLOCK
    queue.GROW, columns.BLOCK = grow, block
    try:
        new, old = both(replace(make_spec(acks=acks, partitions=shape.partitions),
                                time_limit_s=MAX_TIME_LIMIT_S), rows)
    finally:
        queue.GROW, columns.BLOCK = default
    assert new == old


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_values_that_are_the_int32_cells_marks_check_the_same(seed: int) -> None:
    """Values -2**31 and -2**31 + 1, the marks of the offset maps' int32 cells (empty, and
    held in the dict), acknowledged, polled and drained at offsets that disagree: each
    is kept whole, and every disagreement found."""
    rows = copy.deepcopy(list(generate(Shape(seed=seed, values=60, partitions=1, fail=0, info=0))))
    revalue(rows, columns.EMPTY, 1)
    shuffle_drains(rows, seed)
    new, old = both(make_spec(partitions=1), rows)
    assert new == old and new["anomaly_counts"]["inconsistent-offsets"] > 0
