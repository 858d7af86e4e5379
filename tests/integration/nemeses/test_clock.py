"""Clock faults on a real broker: a bump shifts the time the broker writes (a record's
log-append time, its ``System.currentTimeMillis``) without a restart, a strobe moves it
back and forth and ends true, a reset sets it true, and nothing is left behind (the
offset files go with the run's state directory).

One single-node cluster on libfaketime per backend (the docker backend's on the image's
libfaketime, its offset directory mounted read-only): every test sets the clock true
again before it returns.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, KafkaException, Producer
from confluent_kafka.admin import NewTopic

from faultline.cluster import kafka_client
from faultline.cluster.docker.cluster import DockerCluster, labelled_runs
from faultline.cluster.host import clocks
from faultline.cluster.local.cluster import LocalCluster
from faultline.nemeses.clock import TOLERANCE_S, ClockNemesis
from faultline.spec import KafkaSpec, NemesisSpec, TestSpec, TopicSpec
from tests.integration.nemeses.nemesis_helpers import nemesis_op, on_backend, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SPEC = TestSpec(
    name="nemesis-clock",
    kafka=KafkaSpec(nodes=1, heap_mb=384),
    topic=TopicSpec(name="clock-topic", partitions=1, replication_factor=1, min_insync_replicas=1),
    nemesis=NemesisSpec(faults=("clock",)),
)
#: A topic whose records carry the broker's time of append, not the producer's.
APPEND_TIME = "clock-append-time"


@pytest.fixture(scope="module", params=["local", "docker"])
def cluster(request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    """The cluster; once stopped, its offset files are gone with its state directory, and
    on docker its containers and network with their label."""
    with on_backend(request, SPEC) as c:
        topic = NewTopic(APPEND_TIME, 1, 1, config={"message.timestamp.type": "LogAppendTime"})
        with kafka_client.new_admin(c.bootstrap_servers()) as admin:
            admin.create_topics([topic])[APPEND_TIME].result(30)
        offsets, run_id = clocks.offset_file(c.state.dir, 1), c.run_id
        if isinstance(c, DockerCluster):
            mounts = {m["Destination"]: m["RW"] for m in c._container(1).attrs["Mounts"]}
            assert mounts.get(str(offsets.parent)) is False, "the offset directory is not mounted read-only"
        yield c
    assert not offsets.exists() and not offsets.parents[2].exists(), "the offset files were left"
    if isinstance(c, DockerCluster):
        assert run_id not in labelled_runs(), "a container or network of the run was left"


@pytest.fixture
def nemesis(cluster: LocalCluster) -> Iterator[ClockNemesis]:
    n = ClockNemesis()
    n.setup(cluster)
    yield n
    n.teardown()


def broker_skew_s(cluster: LocalCluster) -> float:
    """How far ahead of the true time the broker's clock is, in seconds: a record's
    log-append time minus the midpoint of its send and its acknowledgement."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "linger.ms": 0})
    got: list[int] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            raise KafkaException(err)
        kind, ts = msg.timestamp()  # type: ignore[attr-defined]
        assert kind == TIMESTAMP_LOG_APPEND_TIME
        got.append(ts)

    sent = time.time()
    producer.produce(APPEND_TIME, b"x", on_delivery=delivered)
    assert producer.flush(10) == 0, "a record was not acknowledged within 10 s"
    acked = time.time()
    return got[0] / 1000 - (sent + acked) / 2


def near(cluster: LocalCluster, seconds: float) -> bool:
    return abs(broker_skew_s(cluster) - seconds) < 1.5


def test_a_bump_shifts_the_brokers_time_and_a_reset_sets_it_true(
        cluster: LocalCluster, nemesis: ClockNemesis) -> None:
    assert near(cluster, 0), "the broker's clock was off before any fault"
    done = nemesis.invoke(nemesis_op("clock", {"kind": "bump", "nodes": [1], "offset_s": 300}))
    assert done.value["clocks"] == {"1": 300}
    assert abs(done.value["believed"]["1"] - 300) <= TOLERANCE_S, "the journaled belief is not the bump"
    assert clocks.offset_file(cluster.state.dir, 1).read_text() == "+300\n"
    wait_until(lambda: near(cluster, 300), 10, "the broker's log-append time never ran 300 s ahead")
    done = nemesis.invoke(nemesis_op("reset-clock", {"kind": "clock", "nodes": [1]}))
    assert done.value["clocks"] == {"1": 0}
    assert abs(done.value["believed"]["1"]) <= TOLERANCE_S, "the journaled belief is not true after reset"
    assert clocks.offset_file(cluster.state.dir, 1).read_text() == "+0\n"
    wait_until(lambda: near(cluster, 0), 10, "the broker's log-append time never came back")
    assert cluster.node(1).is_alive()


def test_a_strobe_moves_the_clock_back_and_forth_and_ends_true(
        cluster: LocalCluster, nemesis: ClockNemesis) -> None:
    done = nemesis.invoke(nemesis_op("clock", {"kind": "strobe", "nodes": [1], "offset_s": -60, "for_s": 8}))
    assert abs(done.value["believed"]["1"] + 60) <= TOLERANCE_S, "the belief is not the strobe's jump"
    seen: set[int] = set()
    wait_until(lambda: seen.add(round(broker_skew_s(cluster) / 60)) or seen >= {-1, 0}, 8,
               "the broker's clock did not strobe between -60 s and true")
    wait_until(lambda: not nemesis.strobing, 12, "the strobe did not end after its 8 s")
    wait_until(lambda: near(cluster, 0), 10, "the clock was not true after the strobe")

