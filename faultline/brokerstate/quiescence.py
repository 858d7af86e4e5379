"""Quiescence: after the heal, the moment each partition has settled, and the log end
the drain must read it to.

A partition is *settled* in one reading when

- the metadata names a leader and every replica is in the ISR;
- every replica is a registered, unfenced broker;
- the high watermark clients see (ListOffsets) equals the leader's log end offset,
  read from the leader's log directory (:mod:`faultline.brokerstate.segments`);
- every replica's log end, read the same way, equals the leader's: all caught up.

It is *quiescent* once the same settled reading has held for :data:`STABLE_S`
seconds (two readings at least); its log end then is where the drain must read to.
Why the ISR alone is not enough: docs/design.md, "The run", step 4.

:class:`Quiescence` is the decision, pure (readings and times come from the caller);
:func:`wait_quiescent` reads the cluster until every partition is quiescent or the
time is up.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaException

from faultline.brokerstate.observe import host_data_dirs
from faultline.brokerstate.segments import LogEnds
from faultline.cluster import kafka_client
from faultline.cluster.admin_child import AdminChild
from faultline.cluster.protocol import Cluster, PartitionState
from faultline.cluster.waiting import poll_until
from faultline.errors import ClusterError

#: How long a settled partition must read the same before it counts as quiescent.
STABLE_S = 0.5
#: Seconds each client request of a reading may take.
CLIENT_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class Reading:
    """One look at one partition.

    ``state``: leader, ISR and replicas as the metadata reports them (None when not
    reported); ``hw``: the high watermark clients see, or why there is none; ``leo``:
    replica -> its log end offset on disk (None where unreadable); ``registered``: the
    brokers registered and unfenced; ``error``: what could not be read this time.
    """

    state: PartitionState | None
    hw: int | str | None
    leo: Mapping[int, int | None]
    registered: frozenset[int]
    error: str | None = None


def settled_end(r: Reading) -> int | str:
    """The leader's log end if the partition read as ``r`` is settled (see the module
    docstring), else why it is not: the first unmet condition."""
    s = r.state
    if r.error is not None:
        return r.error
    if s is None:
        return "not in the metadata"
    if s.leader is None:
        return "no leader"
    missing = [n for n in s.replicas if n not in r.registered]
    if missing:
        return f"{_nodes(missing)} not registered and unfenced"
    if not s.full:
        return f"ISR {list(s.isr)} of replicas {list(s.replicas)}"
    if not isinstance(r.hw, int):
        return f"no high watermark ({r.hw})"
    end = r.leo.get(s.leader)
    if end is None:
        return f"leader n{s.leader}'s log end is unreadable"
    if r.hw != end:
        return f"HW {r.hw} {'<' if r.hw < end else '>'} leader n{s.leader}'s log end {end}"
    behind = [n for n in s.replicas if r.leo.get(n) != end]
    if behind:
        return (", ".join(f"n{n}'s log end {r.leo.get(n)}" for n in behind)
                + f" != leader n{s.leader}'s {end}")
    return end


def _nodes(ids: Iterable[int]) -> str:
    return ", ".join(f"n{n}" for n in ids)


class Quiescence:
    """Which of ``partitions`` are quiescent, decided from successive readings.

    Contract: :meth:`add` takes one round (partition -> reading; a partition left out
    was not read) and the ``time.monotonic()`` it was taken at. A partition is
    quiescent in a round when :func:`settled_end` gives its log end and the previous
    rounds since at least ``stable_s`` ago read it exactly the same. After each round,
    ``ends`` holds each partition quiescent in it with its log end, ``reasons`` each
    other partition with why it is not (the unmet condition, or for how long it has
    been settled), and ``done`` says whether every partition is quiescent.
    """

    def __init__(self, partitions: Iterable[int], stable_s: float = STABLE_S) -> None:
        self.stable_s = stable_s
        self.partitions = sorted(partitions)
        self.ends: dict[int, int] = {}
        self.reasons: dict[int, str] = dict.fromkeys(self.partitions, "not read yet")
        self._since: dict[int, tuple[Reading, float]] = {}  # settled: the reading, since when

    @property
    def done(self) -> bool:
        return not self.reasons

    def add(self, readings: Mapping[int, Reading], now: float) -> None:
        """Take one round of readings (see the class contract)."""
        for p in self.partitions:
            self.ends.pop(p, None)
            r = readings.get(p)
            end = "not read" if r is None else settled_end(r)
            if r is None or isinstance(end, str):
                self._since.pop(p, None)
                self.reasons[p] = str(end)
                continue
            prev = self._since.get(p)
            if prev is None or prev[0] != r:
                prev = self._since[p] = (r, now)
            held = now - prev[1]
            if held >= self.stable_s:
                self.ends[p] = end
                self.reasons.pop(p, None)
            else:
                self.reasons[p] = f"settled at log end {end} for only {held:.1f} s"


class _Probe:
    """Reads one round of :class:`Reading` for a topic: the metadata (leader, ISR,
    replicas, registered brokers) and the HWs through the cluster's client listeners,
    each replica's log end from its log directory (only where that is on this host).

    The metadata comes from a Metadata request, which any broker answers at once;
    librdkafka sends DescribeCluster and DescribeTopics to the broker it last saw
    named as controller, and waits for it while that broker is the one just killed.
    A broker's view may lag the controller's, which does no harm here: settled also
    needs every replica's log, on disk, at the HW.
    """

    def __init__(self, cluster: Cluster, admin: AdminChild, topic: str, partitions: int) -> None:
        self._topic = topic
        self._partitions = list(range(partitions))
        self._admin = admin
        self._log_ends = LogEnds(host_data_dirs(cluster), topic)

    def read(self) -> dict[int, Reading]:
        error = None
        try:
            _, registered, states = self._admin.call(kafka_client.topic_metadata, self._topic,
                                                     CLIENT_TIMEOUT_S)
        except (KafkaException, LookupError) as e:
            registered, states, error = frozenset(), {}, f"no metadata: {e}"
        try:
            answers = self._admin.call(kafka_client.high_watermarks, self._topic, self._partitions,
                                       CLIENT_TIMEOUT_S)
            hws = {p: hw.offset if isinstance(hw, kafka_client.HighWatermark) else hw
                   for p, hw in answers.items()}
        except KafkaException as e:
            hws = dict.fromkeys(self._partitions, f"no answer: {e}")
        out = {}
        for p in self._partitions:
            s = states.get(p)
            nodes = s.replicas if s is not None else sorted(self._log_ends.data_dirs)
            out[p] = Reading(s, hws.get(p), {n: self._log_ends.read(n, p) for n in nodes},
                             registered, error)
        return out


def wait_quiescent(cluster: Cluster, topic: str, partitions: int, timeout: float) -> Quiescence:
    """Read ``cluster`` until every partition of ``topic`` is quiescent, for at most
    ``timeout`` seconds (plus one round), and return the decision: the log end of each
    quiescent partition, and for each other one why it is not. Never raises because the
    cluster does not answer: that is a reason."""
    quiescence = Quiescence(range(partitions))
    with AdminChild(cluster.bootstrap_servers(), CLIENT_TIMEOUT_S) as admin:
        probe = _Probe(cluster, admin, topic, partitions)

        def all_quiescent() -> bool:
            quiescence.add(probe.read(), time.monotonic())
            return quiescence.done

        with contextlib.suppress(ClusterError):  # the reasons say what never happened
            poll_until(all_quiescent, time.monotonic() + timeout, lambda: "not quiescent")
    return quiescence
