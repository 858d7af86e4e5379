"""Real clusters for integration tests.

``cluster``: one 3-node local cluster shared by every test that does not destroy state
(started on first use, torn down at the end of the session); a test that faults it must
heal it before it returns. ``fresh_cluster``: a cluster of its own for a test that kills,
partitions or wipes. Both have the spec's topic created. Both need ``local_backend``.

A missing prerequisite skips, with the set-up's one-line reason; under
``FAULTLINE_REQUIRE_ALL=1`` (``make test``) the skip is a failure (tests/conftest.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from faultline.cluster import kafka_dist
from faultline.cluster.docker import engine
from faultline.cluster.local.cluster import LocalCluster
from faultline.errors import SetupError
from faultline.spec import KafkaSpec, TestSpec, TopicSpec

#: Modest heaps: other test suites run clusters on the same machine.
INTEGRATION_SPEC = TestSpec(
    name="integration",
    kafka=KafkaSpec(heap_mb=384, replica_lag_time_max_ms=4000, broker_session_timeout_ms=6000),
    topic=TopicSpec(name="it-topic", partitions=3, replication_factor=3, min_insync_replicas=2),
)


@pytest.fixture(scope="session")
def local_backend() -> None:
    """What a local cluster needs before it starts: root, and what ``LocalCluster.start``
    ensures (Java and the Kafka jars, Toxiproxy, ip and iptables); skips if any is missing."""
    if os.geteuid() != 0:
        pytest.skip("the local backend needs root (network namespaces, iptables)")
    try:
        kafka_dist.ensure_kafka(INTEGRATION_SPEC.kafka.version, INTEGRATION_SPEC.kafka.home)
        kafka_dist.ensure_toxiproxy()
        kafka_dist.ensure_iptables()
    except SetupError as e:
        pytest.skip(f"no local cluster: {e}")


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[None]:
    """A Docker engine running on the host: the one there is, or ``dockerd`` started here.

    At the end of the session an engine faultline started (here, or by ``faultline setup
    --backend docker`` as ``make test`` runs it) is stopped and the host's firewall,
    sysctls and links are put back as they were before it started (engine.stop); a
    user's own engine is left alone."""
    if os.geteuid() != 0:
        pytest.skip("starting dockerd needs root")
    if not engine.running():
        try:
            engine.start()
        except SetupError as e:
            pytest.skip(f"no Docker engine: {e}")
    yield
    engine.stop()


def _started(spec: TestSpec) -> Iterator[LocalCluster]:
    try:
        cluster = LocalCluster(spec)
        cluster.__enter__()
    except SetupError as e:
        pytest.skip(f"no local cluster: {e}")
    try:
        cluster.create_topic()
        yield cluster
    finally:
        cluster.__exit__(None, None, None)


@pytest.fixture(scope="session")
def cluster(local_backend: None) -> Iterator[LocalCluster]:
    yield from _started(INTEGRATION_SPEC)


@pytest.fixture
def fresh_cluster(local_backend: None) -> Iterator[LocalCluster]:
    yield from _started(INTEGRATION_SPEC)
