"""What a cluster says, asked through its client listeners (the proxies): registered
brokers, topics, each partition's leader, ISR and high watermark, and a produce/consume
round trip.

Backend-independent: every function needs only bootstrap servers or an admin client
made from them, so the local backend and the observer ask Kafka the same way.
librdkafka's own log lines (connection refused while a node starts, ...) go to the
``faultline.cluster.kafka_client`` logger, not straight to stderr.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]  # stubs lack it
from confluent_kafka.cimpl import NewTopic

from faultline.cluster.protocol import PartitionState
from faultline.errors import ClusterError
from faultline.spec import TopicSpec

#: One partition per node, led by that node: a round trip through it crosses every proxy,
#: and its records carry their broker's wall clock (log-append time, :func:`clock_offsets`).
HEALTH_TOPIC = "faultline-health"
CLIENT_LOG = logging.getLogger("faultline.cluster.kafka_client")
CLIENT_LOG.addHandler(logging.NullHandler())


def client_config(bootstrap: str) -> dict[str, Any]:
    """The settings every harness client starts from."""
    return {"bootstrap.servers": bootstrap, "logger": CLIENT_LOG}


@contextlib.contextmanager
def new_admin(bootstrap: str, timeout_s: float = 5.0) -> Iterator[AdminClient]:
    """An admin client whose sockets give up after ``timeout_s``, closed on leaving the
    ``with``, in the thread that leaves it.

    Never one left to the garbage collector: a client in a reference cycle (a traceback
    holding its frame is enough) may be collected in librdkafka's own background thread,
    by the callback of its own late answer, and destroying it there crashes the process
    (confluentinc/confluent-kafka-python#2129, #2131).
    """
    ms = int(timeout_s * 1000)
    with AdminClient({
        **client_config(bootstrap), "socket.timeout.ms": ms,
        "socket.connection.setup.timeout.ms": min(ms, 3000), "reconnect.backoff.max.ms": 500,
        # librdkafka waits for the controller named by the last metadata; when a fault
        # takes that broker out, only a refresh names another (nemeses).
        "topic.metadata.refresh.interval.ms": 1000}) as admin:
        yield admin


def registered_brokers(admin: AdminClient, timeout: float = 5.0) -> set[int]:
    """Ids of the brokers the cluster metadata lists: registered and unfenced."""
    result = admin.describe_cluster(request_timeout=timeout).result(timeout=timeout + 1)
    return {int(n.id) for n in result.nodes}


def topic_names(admin: AdminClient, timeout: float) -> list[str]:
    """The names of the cluster's topics but its internal ones (``__``), sorted."""
    return sorted(t for t in admin.list_topics(timeout=timeout).topics if not t.startswith("__"))


def create_topic(admin: AdminClient, topic: TopicSpec, timeout: float) -> None:
    """Create ``topic`` with its min.insync and unclean settings (an existing one is
    fine); ClusterError otherwise. Does not wait for leaders."""
    config = {
        "min.insync.replicas": str(topic.min_insync_replicas),
        "unclean.leader.election.enable": str(topic.unclean_leader_election_enable).lower(),
    }
    new = NewTopic(topic.name, num_partitions=topic.partitions,
                   replication_factor=topic.replication_factor, config=config)  # fmt: skip
    _create(admin, new, timeout)


def create_health_topic(admin: AdminClient, node_ids: Sequence[int]) -> None:
    """Create :data:`HEALTH_TOPIC`, partition i on node ``node_ids[i]`` only, its records
    stamped with the time their broker appended them."""
    assignment = [[i] for i in node_ids]
    _create(admin, NewTopic(HEALTH_TOPIC, num_partitions=len(assignment), replica_assignment=assignment,
                            config={"message.timestamp.type": "LogAppendTime"}), 10)


#: Errors of a CreateTopics request that never got its answer: sending it again is safe
#: (a topic it did create answers TOPIC_ALREADY_EXISTS). librdkafka destroys the handles of
#: the bootstrap brokers once metadata names the real ones, failing what was in flight on
#: them with _DESTROY_BROKER (seen creating the health topic on Kafka 3.9.1).
_UNANSWERED = frozenset({KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT})


def _create(admin: AdminClient, new: NewTopic, timeout: float, attempts: int = 3) -> None:
    for attempt in range(1, attempts + 1):
        try:
            admin.create_topics([new], request_timeout=timeout)[new.topic].result(timeout=timeout + 5)
            return
        except KafkaException as e:
            if "TOPIC_ALREADY_EXISTS" in str(e):
                return
            if attempt == attempts or e.args[0].code() not in _UNANSWERED:
                raise ClusterError(f"cannot create topic {new.topic}: {e}") from None
            time.sleep(0.5)


#: How long a topic may stay unknown to the brokers asked before :func:`partition_states`
#: gives up: a broker learns of a new topic from the metadata log a moment after the
#: controller does, and later on a loaded machine (seen in CI: a topic whose creation
#: one broker had confirmed was unknown to the next one asked).
UNKNOWN_FOR_S = 5.0


def partition_states(admin: AdminClient, topic: str) -> dict[int, PartitionState]:
    """partition -> leader, ISR and replicas of ``topic``; ClusterError if unknown for
    :data:`UNKNOWN_FOR_S` or not described.

    Asks DescribeTopics first. librdkafka sends it only to the broker the last metadata
    named as controller, and waits for it; after a fault took that broker out this
    times out until the broker is fenced, so a Metadata request, answered by any
    broker and carrying the same leader and ISR, is the fallback.
    """
    deadline = time.monotonic() + UNKNOWN_FOR_S
    while True:
        try:
            desc = admin.describe_topics(TopicCollection([topic]), request_timeout=5)[
                topic].result(timeout=6)
            break
        except KafkaException as e:
            try:
                return metadata_states(admin, topic, 5.0)
            except (KafkaException, LookupError):
                if (e.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART
                        or time.monotonic() >= deadline):
                    raise ClusterError(f"cannot describe {topic}: {e}") from None
        time.sleep(0.2)
    out: dict[int, PartitionState] = {}
    for p in desc.partitions:
        leader = int(p.leader.id) if p.leader is not None and p.leader.id >= 0 else None
        out[int(p.id)] = PartitionState(leader, tuple(sorted(int(n.id) for n in p.isr)),
                                        tuple(int(n.id) for n in p.replicas))
    return out


def metadata_states(admin: AdminClient, topic: str, timeout: float) -> dict[int, PartitionState]:
    """:func:`partition_states` from a Metadata request (any broker answers it, from its
    own metadata cache); LookupError when the answer lacks the topic or its partitions,
    KafkaException when there is no answer."""
    return topic_metadata(admin, topic, timeout).states


class Metadata(NamedTuple):
    """One broker's Metadata answer for a topic, from its own metadata cache."""

    #: the broker that gave it; -1 for the client's bootstrap broker, whose id the client
    #: may not have learned (its other brokers it knows by id)
    broker: int
    #: the brokers it lists: the registered and unfenced ones, as far as it knows
    brokers: frozenset[int]
    #: the topic's partitions, as :func:`metadata_states` gives them
    states: dict[int, PartitionState]


def topic_metadata(admin: AdminClient, topic: str, timeout: float) -> Metadata:
    """One Metadata answer (any broker gives it); raises as :func:`metadata_states` does."""
    md = admin.list_topics(topic, timeout=timeout)
    tmd = md.topics.get(topic)
    if tmd is None or tmd.error is not None or not tmd.partitions:
        raise LookupError(f"no metadata for {topic}: {tmd.error if tmd else 'not listed'}")
    return Metadata(int(md.orig_broker_id), frozenset(int(b) for b in md.brokers), {
        int(pid): PartitionState(int(p.leader) if p.leader >= 0 else None,
                                 tuple(sorted(int(n) for n in p.isrs)),
                                 tuple(int(n) for n in p.replicas))
        for pid, p in tmd.partitions.items()})


class HighWatermark(NamedTuple):
    """A partition's high watermark as a ListOffsets answer gave it, and the leader epoch
    the answering broker was in (None when the answer carried none)."""

    offset: int
    leader_epoch: int | None


def high_watermarks(admin: AdminClient, topic: str, partitions: Sequence[int],
                    timeout: float, committed: bool = False) -> dict[int, HighWatermark | str]:
    """partition -> the high watermark clients see (ListOffsets latest, read_uncommitted),
    or with ``committed`` the last stable offset in its place (read_committed, KIP-98: the
    first offset of a transaction still open, else the HW), or the error's name when there
    is none; never raises for one partition's error. The
    request goes to the leader librdkafka's metadata cache names, with no leader epoch to
    fence it, so a deposed leader cut off from the controller may answer with its stale
    HW: librdkafka forgets the highest epoch it saw after a NOT_LEADER_OR_FOLLOWER or
    LEADER_NOT_AVAILABLE answer."""
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    futures = admin.list_offsets({TopicPartition(topic, p): latest for p in partitions},
                                 isolation_level=(IsolationLevel.READ_COMMITTED if committed
                                                  else IsolationLevel.READ_UNCOMMITTED),
                                 request_timeout=timeout)
    out: dict[int, HighWatermark | str] = {}
    for tp, future in futures.items():
        try:
            info = future.result(timeout=timeout + 1)
            offset = int(info.offset)
            # librdkafka answers a leader that timed out with OFFSET_INVALID (-1001)
            out[int(tp.partition)] = (HighWatermark(offset, info.leader_epoch) if offset >= 0
                                      else f"no offset ({offset})")
        except KafkaException as e:
            err = e.args[0] if e.args else e
            out[int(tp.partition)] = err.name() if hasattr(err, "name") else str(err)
        except TimeoutError:
            out[int(tp.partition)] = "TIMED_OUT"
    return out


class Committed(NamedTuple):
    """A group's committed offset of a partition, and the leader epoch it was committed
    with (None when the answer carried none)."""

    offset: int
    leader_epoch: int | None


def committed_positions(admin: AdminClient, group: str, timeout: float) -> dict[tuple[str, int], Committed]:
    """``group``'s committed offsets with their leader epochs, (topic, partition) ->
    :class:`Committed`, as its coordinator answers an OffsetFetch of all of them (none for
    a group that never committed: Kafka answers an unknown group with no topics);
    KafkaException when there is no answer (no coordinator), TimeoutError when it takes
    over ``timeout``."""
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                request_timeout=timeout)
    answer = futures[group].result(timeout=timeout + 1)
    return {(tp.topic, int(tp.partition)): Committed(int(tp.offset), tp.leader_epoch)
            for tp in answer.topic_partitions or () if tp.offset >= 0 and tp.error is None}


def committed_offsets(admin: AdminClient, group: str, timeout: float) -> dict[tuple[str, int], int]:
    """:func:`committed_positions` without the leader epochs."""
    return {tp: c.offset for tp, c in committed_positions(admin, group, timeout).items()}


def round_trip(bootstrap: str, partitions: int, timeout: float) -> None:
    """Produce a fresh value to each of :data:`HEALTH_TOPIC`'s ``partitions`` with
    acks=all and read each back; ClusterError saying which step failed."""
    nonce = uuid.uuid4().hex
    producer = Producer(
        {**client_config(bootstrap), "acks": "all",
         "message.timeout.ms": int(timeout * 1000), "enable.idempotence": False}
    )  # fmt: skip
    acked: dict[int, int] = {}
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.partition()] = msg.offset()

    for p in range(partitions):
        producer.produce(HEALTH_TOPIC, value=nonce.encode(), partition=p, on_delivery=delivered)
    producer.flush(timeout)
    if errors or len(acked) != partitions:
        raise ClusterError(f"health produce failed: {errors or 'no acknowledgement'}")
    consumer = Consumer(
        {**client_config(bootstrap), "group.id": f"faultline-health-{nonce}",
         "enable.auto.commit": False, "socket.timeout.ms": 5000}
    )  # fmt: skip
    try:
        consumer.assign([TopicPartition(HEALTH_TOPIC, p, off) for p, off in acked.items()])
        seen: set[int] = set()
        end = time.monotonic() + timeout
        while seen != set(acked) and time.monotonic() < end:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None and msg.value() == nonce.encode():
                seen.add(int(msg.partition() or 0))
        if seen != set(acked):
            raise ClusterError(f"health consume read back partitions {sorted(seen)} of {sorted(acked)}")
    finally:
        consumer.close()


def clock_offsets(bootstrap: str, partitions: Mapping[int, int], timeout: float) -> dict[int, float | None]:
    """How far each node's wall clock is ahead of the harness's, in seconds, as its broker
    shows it: ``partitions`` maps a node to its :data:`HEALTH_TOPIC` partition; a record
    produced there carries the broker's time of append, less the harness's wall time at
    the send (over by at most the record's round trip). None for a node whose record was
    not acknowledged within ``timeout``; ClusterError if the topic stamps no append time."""
    producer = Producer(
        {**client_config(bootstrap), "acks": "1", "linger.ms": 0,
         "message.timeout.ms": max(1, int(timeout * 1000)), "enable.idempotence": False}
    )  # fmt: skip
    appended: dict[int, tuple[int, int]] = {}

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            appended[int(msg.partition())] = msg.timestamp()

    sent: dict[int, float] = {}
    for p in partitions.values():
        sent[p] = time.time()
        producer.produce(HEALTH_TOPIC, value=b"clock", partition=p, on_delivery=delivered)
    producer.flush(timeout + 1)
    if any(kind != TIMESTAMP_LOG_APPEND_TIME for kind, _ in appended.values()):
        raise ClusterError(f"{HEALTH_TOPIC} does not stamp records with their log-append time")
    return {node: (appended[p][1] / 1000 - sent[p]) if p in appended else None
            for node, p in partitions.items()}
