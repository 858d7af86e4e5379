"""The queue checker's engine against its previous version (reference_queue.py), kept
as a reference until the new one is proven: identical results.json objects, examples
and stories included, on the stored real run and on generated histories, correct or
mutated, with values the workload writes (0, 1, 2, ...) and values it never would
(negative, far apart), which take the engine's other path, and columns that grow
one slot at a time."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from faultline.checkers import queue
from faultline.checkers.synthetic import Shape, generate
from faultline.checkers.whitebox import BrokerFiles, partition_timeline
from faultline.history import ReadResult, iter_rows
from faultline.spec import TestSpec
from tests.unit.checkers import reference_queue
from tests.unit.checkers.queue_hist import make_spec
from tests.unit.checkers.test_queue_properties import MUTATIONS, Index, shapes

STORED = Path(__file__).parents[2] / "e2e" / "data" / "kill-partition"
Rows = list[dict[str, Any]]


def both(spec: TestSpec, rows: Rows, **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    return (queue.check_rows(spec, rows, **kw).to_json(),
            reference_queue.check_rows(spec, rows, **kw).to_json())


def test_the_stored_real_run_checks_the_same() -> None:
    spec = TestSpec.load(STORED / "test.json")
    files = BrokerFiles.read(STORED)
    read = ReadResult()
    rows = list(iter_rows(STORED, read))
    kw = {"truncated": read, "timeline": partition_timeline(files.metadata, spec.topic.name),
          "replicas": files.replicas}
    new, old = both(spec, rows, **kw)
    assert new == old and new["stats"]["send"]["ok"] > 0


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
       shift=st.sampled_from([0, 0, -(10**6), 2**40]), spread=st.sampled_from([1, 1, 3, 2**21]),
       mutations=st.lists(st.sampled_from(sorted(MUTATIONS)), max_size=3))
def test_generated_histories_check_the_same(shape: Shape, data: st.DataObject, acks: str, shift: int,
                                            spread: int, mutations: list[str]) -> None:
    grow = data.draw(st.sampled_from([1, 7, queue.GROW]), "how the columns grow")
    rows = copy.deepcopy(list(generate(shape)))
    for name in mutations:
        ix = Index(rows)
        if ix.polls:
            MUTATIONS[name][0](ix, data)
    revalue(rows, shift, spread)
    note(f"{shape}, acks={acks}, values * {spread} + {shift}, mutations {mutations}")
    default, queue.GROW = queue.GROW, grow
    try:
        new, old = both(make_spec(acks=acks, partitions=shape.partitions), rows)
    finally:
        queue.GROW = default
    assert new == old
