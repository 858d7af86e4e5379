"""Shared helpers for the nemesis integration tests: real clusters, real faults.

Each test module starts the clusters it needs (one per module for faults that heal
fully, a fresh one per test where a fault destroys state). Waiting is always polling
a condition read from Kafka (or the node's files) with a deadline and a message that
says what never happened.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest

from faultline.cluster.backends import cluster_for
from faultline.cluster.local.cluster import LocalCluster
from faultline.cluster.protocol import PartitionState
from faultline.errors import FaultlineError
from faultline.history import Op
from faultline.spec import TestSpec


@contextmanager
def running(spec: TestSpec) -> Iterator[LocalCluster]:
    """A started cluster of ``spec.backend`` with the spec's topic created; stopped on
    exit, always."""
    cluster = cluster_for(spec)(spec)
    assert isinstance(cluster, LocalCluster)  # both backends' clusters are
    with cluster:
        cluster.create_topic()
        yield cluster


@contextmanager
def on_backend(request: pytest.FixtureRequest, spec: TestSpec) -> Iterator[LocalCluster]:
    """:func:`running` on the backend a fixture is parametrized with (``local``, ``docker``:
    with the test session's Docker engine)."""
    if request.param == "docker":
        request.getfixturevalue("docker_engine")
    with running(replace(spec, backend=request.param)) as c:
        yield c


def nemesis_op(f: str, value: dict[str, Any]) -> Op:
    """An invoke op as the package would journal it."""
    return Op(0, 0, "nemesis", "info", f, value)


def wait_until(cond: Callable[[], bool], timeout: float, what: str, every: float = 0.2) -> float:
    """Poll ``cond`` until it holds; returns the seconds it took. Errors from the cluster
    (a paused or isolated broker answering late) count as "not yet"."""
    start = time.monotonic()
    last = ""
    while time.monotonic() - start < timeout:
        try:
            if cond():
                return time.monotonic() - start
        except FaultlineError as e:
            last = f" (last error: {e})"
        time.sleep(every)
    raise AssertionError(f"{what} did not happen within {timeout:.0f} s{last}")


def partition_state(cluster: LocalCluster, topic: str, partition: int = 0) -> PartitionState:
    """Leader and ISR of one partition, asking again while a broker answers with metadata
    it has not caught up on (e.g. ``UNKNOWN_TOPIC_OR_PART`` right after creation)."""
    box: list[PartitionState] = []

    def answered() -> bool:
        state = cluster.leaders(topic).get(partition)
        box[:] = [state] if state is not None else []
        return bool(box)

    wait_until(answered, 30, f"a description of {topic}/{partition}")
    return box[0]


def report(line: str) -> None:
    """Print an observation for the test log (run pytest with -s to see them)."""
    print(f"[nemesis-observation] {line}", flush=True)
