"""The test spec: one frozen value built from CLI options and an optional YAML file.

Every part of a run receives the spec; nothing reads globals. Variants are made with
``dataclasses.replace``. ``TestSpec.to_json()`` is what ``test.json`` holds (docs/history.md),
and ``TestSpec.from_mapping`` reads it (or a YAML spec) back, rejecting unknown keys
with a message that names them.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from faultline.errors import SpecError
from faultline.faults import FAMILIES
from faultline.targeted import Wait, is_clock_step, parse_schedule
from faultline.yamlfile import read_yaml_mapping

Acks = Literal["0", "1", "all"]
ACKS: tuple[str, ...] = typing.get_args(Acks)

#: Fault families a nemesis can mix (:data:`faultline.faults.FAMILIES`).
FAULTS: tuple[str, ...] = tuple(FAMILIES)

DEFAULT_KAFKA_VERSION = "4.3.1"
#: What a Kafka release's version looks like (4.3.1, 4.1.0-rc2): what Maven is asked for.
_KAFKA_VERSION = re.compile(r"\d+\.\d+\.\d+(?:[-.][A-Za-z0-9.]+)?")
#: A Kafka setting's name (``log.dirs``, ``listener.name.client.ssl.keystore.location``).
_SETTING_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: A docker image reference, as Docker's reference grammar (distribution/reference) has it:
#: ``[host[:port]/]path[:tag][@digest]``, or an image id; never an option (``-...``).
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_PATH_PART = r"[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    rf"(?:(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?/)?"
    rf"{_PATH_PART}(?:/{_PATH_PART})*"
    r"(?::\w[\w.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?",
    re.ASCII,
)

#: The most partitions a test topic may have: Kafka's controller refuses a CreateTopics
#: request of more (KAFKA-17870, Kafka 3.9 on), and the checker counts at most 32,768.
MAX_PARTITIONS = 10_000
#: The longest topic name Kafka accepts (``org.apache.kafka.common.internals.Topic``).
MAX_TOPIC_NAME = 249
#: The highest seed: what ``test.json`` (orjson) and the pipeline's int64 ``seed`` column hold.
MAX_SEED = 2**63 - 1
#: The clients' ranges of ``retries`` and ``max_in_flight`` (librdkafka's; the Java
#: client's are no narrower): librdkafka reads a larger number modulo 2**32, so 2**32 retries
#: would run as 0 while test.json, and the checker, said otherwise.
MAX_RETRIES = 2**31 - 1
MAX_IN_FLIGHT = 1_000_000
#: The longest main phase: a week.
MAX_TIME_LIMIT_S = 7 * 24 * 3600.0
#: The shortest interval between faults: the schedule counts milliseconds, and below a few
#: its starts round back onto each other and it never ends.
MIN_INTERVAL_S = 0.01
#: The most faults a seeded schedule holds, about: it is built before the main phase.
MAX_SCHEDULED_FAULTS = 100_000


@dataclass(frozen=True, slots=True)
class KafkaSpec:
    """The cluster: Kafka version, node count and the broker settings a test turns.

    Timeouts are short by default so that faults show within a minute-long run.
    ``broker_config`` adds or overrides any ``server.properties`` key.
    """

    version: str = DEFAULT_KAFKA_VERSION
    nodes: int = 3
    home: str | None = None
    #: The docker backend's image (default: faultline/kafka:<version>, built by the set-up).
    image: str | None = None
    heap_mb: int = 512
    replica_lag_time_max_ms: int = 5000
    broker_session_timeout_ms: int = 6000
    broker_heartbeat_interval_ms: int = 1000
    log_flush_interval_messages: int | None = None
    broker_config: Mapping[str, str] = field(default_factory=dict)
    #: The cluster's ``transaction.version`` feature (1 or 2, KIP-890), set when its storage
    #: is formatted (Kafka 4.0 and later); None: the version's default.
    transaction_version: int | None = None

    @property
    def internal_replication_factor(self) -> int:
        """The replication factor the harness gives Kafka's internal topics
        (``__consumer_offsets``, ``__transaction_state``, ...) unless ``broker_config`` sets
        one: 3, or every node of a smaller cluster."""
        return min(3, self.nodes)


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """The topic under test."""

    name: str = "fl-queue"
    partitions: int = 3
    replication_factor: int = 3
    min_insync_replicas: int = 2
    unclean_leader_election_enable: bool = False


@dataclass(frozen=True, slots=True)
class ProducerSpec:
    """Producer settings, named as in docs/history.md's ``test.json``. Read from a mapping
    without ``enable_idempotence``, idempotence is on where :func:`idempotence_allowed`."""

    acks: Acks = "all"
    enable_idempotence: bool = True
    retries: int = 2147483647
    max_in_flight: int = 5
    delivery_timeout_ms: int = 10000
    request_timeout_ms: int = 3000
    linger_ms: int = 5


#: A group member's session timeout and heartbeat interval, in ms, under either protocol
#: (fixed, not a spec's field): the classic member asks for them (``session.timeout.ms``,
#: ``heartbeat.interval.ms``, :func:`faultline.workloads.group.group_config`), a KIP-848
#: member gets them from the broker
#: (:data:`faultline.cluster.kafka_config.GROUP_CONSUMER_SETTINGS`), so a fault shows within
#: a run either way, and the group checker knows when a stopped member's session expired.
GROUP_SESSION_TIMEOUT_MS = 6000
GROUP_HEARTBEAT_INTERVAL_MS = 1000


@dataclass(frozen=True, slots=True)
class ConsumerSpec:
    """Consumer settings; ``mode`` is ``assign`` (every partition, no group: the queue
    workload) or ``subscribe`` (one group: the group workload, whose members join with
    ``group_protocol``, ``classic`` or KIP-848's ``consumer``, and commit ``sync``,
    ``async`` or ``auto``, :mod:`faultline.workloads.group`); ``static``: each member
    joins with its slot's ``group.instance.id`` (:meth:`TestSpec.instance_id`, static
    membership, KIP-345)."""

    isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted"
    mode: Literal["assign", "subscribe"] = "assign"
    group_protocol: Literal["classic", "consumer"] = "classic"
    commit: Literal["sync", "async", "auto"] = "sync"
    static: bool = False


#: workload name -> the checkers that judge its runs (:data:`faultline.checkers.stored.CHECKERS`),
#: in order: the first's verdict is the run's, the others' add to it.
WORKLOAD_CHECKERS: Mapping[str, tuple[str, ...]] = {
    "queue": ("queue", "white-box"),
    "txn": ("txn",),
    "group": ("queue", "group", "white-box"),
}


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """Which workload (:data:`faultline.workloads.WORKLOADS`), with which client under
    test (``librdkafka`` through confluent-kafka, or ``java``: the Java client of the
    broker's version), and how hard its clients drive the cluster; ``rate`` 0 means as
    fast as it goes."""

    name: str = "queue"
    client: Literal["librdkafka", "java"] = "librdkafka"
    producers: int = 2
    consumers: int = 1
    rate: float = 0.0

    @property
    def checkers(self) -> tuple[str, ...]:
        """The checkers that judge this workload's runs (:data:`WORKLOAD_CHECKERS`); none
        for a workload without one."""
        return WORKLOAD_CHECKERS.get(self.name, ())


#: A transaction's gaps between sends together at most (``transactions.gap_ms``), ms: half
#: the shortest ``transaction.timeout.ms`` the txn workload sets (10 s), so that the
#: coordinator never aborts a transaction for its gaps, and well inside the time a stopping
#: producer is given to end its transaction.
MAX_TRANSACTION_GAPS_MS = 5_000


@dataclass(frozen=True, slots=True)
class TransactionSpec:
    """The ``txn`` workload's transactions: ``sends`` per transaction, spread over the
    partitions, and the probability that the workload aborts one rather than commits it;
    ``reads``: with more than 0, each producer is a read-process-write processor that reads up
    to that many records per transaction in one group (:mod:`faultline.workloads.rpw`);
    ``gap_ms``: the pause between one send of a transaction and its next (0: they go out at
    once, and under transaction protocol 1 the client mostly adds their partitions to the
    transaction in one request; with a gap, each as the transaction first sends to it). A
    transaction's gaps together are at most :data:`MAX_TRANSACTION_GAPS_MS`; they slow the
    producer below ``workload.rate`` where the rate asks for more."""

    sends: int = 4
    abort_probability: float = 0.1
    reads: int = 0
    gap_ms: int = 0


@dataclass(frozen=True, slots=True)
class NemesisSpec:
    """Which faults the seeded schedule mixes, and how often; or, instead, a targeted
    ``schedule`` (steps in roles and observed states, :mod:`faultline.targeted`).
    ``link_loss_percent`` and ``link_rate_kbit``, when set, are what every degraded link
    of the ``links`` family drops or is limited to, in place of a value drawn per fault;
    with one of them set, the schedule degrades links only that way (a sweep axis)."""

    faults: tuple[str, ...] = ()
    interval_s: float = 10.0
    max_concurrent: int = 1
    schedule: tuple[str, ...] = ()
    link_loss_percent: float | None = None
    link_rate_kbit: int | None = None

    @property
    def crashes_clients(self) -> bool:
        """Whether the schedule crashes or pauses clients (the ``clients`` family) or waits
        on what they did (a member's partitions, a producer's commits), so that the
        workload runs each producer (and each group consumer) in a child process that can
        be killed, stopped and read."""
        return "clients" in self.faults or any(s.on_clients for s in parse_schedule(self.schedule))

    @property
    def skews_clocks(self) -> bool:
        """Whether a clock fault may run (``clock`` among the faults, or a targeted clock
        step): the brokers then start on libfaketime (:mod:`faultline.cluster.host.clocks`)."""
        return "clock" in self.faults or any(is_clock_step(s) for s in self.schedule)


@dataclass(frozen=True, slots=True)
class TestSpec:
    """A whole test. ``start_wall_ms`` is set when the run starts (0 before)."""

    name: str = "queue"
    seed: int = 0
    time_limit_s: float = 60.0
    start_wall_ms: int = 0
    backend: Literal["local", "docker"] = "local"
    kafka: KafkaSpec = field(default_factory=KafkaSpec)
    topic: TopicSpec = field(default_factory=TopicSpec)
    producer: ProducerSpec = field(default_factory=ProducerSpec)
    consumer: ConsumerSpec = field(default_factory=ConsumerSpec)
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    nemesis: NemesisSpec = field(default_factory=NemesisSpec)
    transactions: TransactionSpec = field(default_factory=TransactionSpec)

    __test__ = False  # not a pytest test class, despite the name

    def __post_init__(self) -> None:
        _validate(self)

    def to_json(self) -> dict[str, Any]:
        """The ``test.json`` form: plain JSON types, every field present."""
        out: dict[str, Any] = _to_json(self)
        return out

    @property
    def group_id(self) -> str:
        """The ``group.id`` of the run's consumers, ``faultline-<name>``: the group
        workload's group."""
        return f"faultline-{self.name}"

    @property
    def rpw_group_id(self) -> str:
        """The read-process-write processors' group (``transactions.reads``), ``<group id>-rpw``."""
        return f"{self.group_id}-rpw"

    def instance_id(self, slot: int) -> str:
        """Consumer slot ``slot``'s ``group.instance.id`` with static membership
        (``consumer.static``), ``<group id>-<slot>``: kept by the slot's replacements."""
        return f"{self.group_id}-{slot}"

    def transactional_id(self, index: int) -> str:
        """Producer ``index``'s ``transactional.id`` in the txn workload,
        ``faultline-<name>-t<index>``, kept by every instance that replaces it."""
        return f"faultline-{self.name}-t{index}"

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "spec",
                     strict: bool = True) -> TestSpec:
        """Build a spec from ``test.json`` or YAML data; raises SpecError naming ``source``.

        ``strict`` rejects unknown keys (a typo in a user's YAML must not pass
        silently); ``strict=False`` ignores them, for reading a ``test.json`` that a
        later version or another tool wrote with more keys, as docs/history.md allows.
        """
        spec: TestSpec = _from_mapping(cls, data, source, strict)
        return spec

    @classmethod
    def load(cls, path: Path) -> TestSpec:
        """A stored ``test.json``, read with ``strict=False`` (extra keys are welcome,
        docs/history.md); one SpecError line naming ``path`` if it is unreadable, invalid,
        or lacks a key docs/history.md says every test.json holds."""
        path = Path(path)
        if path.exists() and not path.is_file() and not path.is_dir():  # reading a FIFO never ends
            raise SpecError(f"{path}: not a regular file")
        try:
            data = orjson.loads(path.read_bytes())
        except OSError as e:
            raise SpecError(f"{path}: cannot read: {e.strerror}") from None
        except orjson.JSONDecodeError as e:
            raise SpecError(f"{path}: not valid JSON ({e})") from None
        if not isinstance(data, dict):
            raise SpecError(f"{path}: expected a JSON object")
        try:
            spec = cls.from_mapping(data, source=str(path), strict=False)
        except SpecError as e:  # a value out of range is named as its option: say which file
            raise SpecError(str(e) if str(e).startswith(str(path)) else f"{path}: {e}") from None
        missing = [k for k in ("name", "seed", "start_wall_ms", *_STORED_KEYS) if k not in data]
        missing += [f"{section}.{k}" for section, keys in _STORED_KEYS.items()
                    if isinstance(data.get(section), dict) for k in keys if k not in data[section]]
        if missing:  # a default in its place could judge the run against a config it never ran
            raise SpecError(f"{path}: lacks {', '.join(missing)}, which every test.json holds "
                            "(docs/history.md)")
        return spec


#: The keys of each section that every ``test.json`` holds (docs/history.md, its schema).
_STORED_KEYS: Mapping[str, tuple[str, ...]] = {
    "kafka": ("version", "nodes"),
    "topic": ("name", "partitions", "replication_factor", "min_insync_replicas",
              "unclean_leader_election_enable"),
    "producer": ("acks", "enable_idempotence", "retries", "max_in_flight"),
    "consumer": ("isolation_level", "mode"),
    "nemesis": ("faults", "interval_s"),
}


def _to_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_to_json(v) for v in value]
    return value


def _from_mapping(cls: type[Any], data: Any, where: str, strict: bool) -> Any:
    if not isinstance(data, Mapping):
        raise SpecError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown and strict:
        raise SpecError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
    kwargs = {name: _coerce(hints[name], data[name], f"{where}.{name}", strict)
              for name in data if name in names}
    try:
        value = cls(**kwargs)
    except TypeError as e:  # pragma: no cover - all fields have defaults
        raise SpecError(f"{where}: {e}") from None
    if cls is ProducerSpec and "enable_idempotence" not in data:
        value = dataclasses.replace(value, enable_idempotence=idempotence_allowed(value))
    return value


def _coerce(hint: Any, value: Any, where: str, strict: bool) -> Any:
    """Check ``value`` against a field's type hint, converting YAML/JSON forms."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return _from_mapping(hint, value, where, strict)  # type: ignore[arg-type]
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _coerce(inner, value, where, strict)
    if origin is Literal:
        # YAML reads `acks: 1` as an int; every Literal here is of strings.
        text = value if isinstance(value, bool) else str(value)
        if text not in args:
            raise SpecError(f"{where}: {value!r} is not one of {', '.join(map(str, args))}")
        return text
    if origin is tuple:
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple):
            raise SpecError(f"{where}: expected a list, got {value!r}")
        bad = [i for i, item in enumerate(items) if not isinstance(item, str | int | float | bool | None)]
        if bad:  # asked before str() of any: str() of a list or mapping walks all of it
            raise SpecError(f"{where}[{bad[0]}]: expected a string, got {_kind(items[bad[0]])}")
        out = tuple(str(i).strip() for i in items if str(i).strip())
        return () if out == ("none",) else out  # "none": the explicit empty list
    if origin is Mapping or hint is Mapping:
        if not isinstance(value, Mapping):
            raise SpecError(f"{where}: expected a mapping, got {value!r}")
        bad = [k for k, v in value.items() if not isinstance(v, str | int | float | bool)]
        if bad:  # str() would make a null "None", a list its repr
            raise SpecError(f"{where}.{bad[0]}: expected a string, number or boolean, "
                            f"got {value[bad[0]]!r}")
        return {str(k): str(v) for k, v in value.items()}
    if hint is bool:
        if not isinstance(value, bool):
            raise SpecError(f"{where}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SpecError(f"{where}: expected a number, got {value!r}")
        if not math.isfinite(value):
            raise SpecError(f"{where}: expected a finite number, got {value!r}")
        return float(value)
    if hint is str:  # YAML reads `name: 1` as an int: a number is its text
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise SpecError(f"{where}: expected a string, got {value!r}")
        return str(value)
    raise SpecError(f"{where}: cannot read a value of type {hint}")  # pragma: no cover


def _kind(value: Any) -> str:
    """What a value that is no scalar is, in a few words, without walking it."""
    return f"a {'mapping' if isinstance(value, Mapping) else type(value).__name__} of {len(value)}" if (
        isinstance(value, Mapping | list | tuple | set)) else type(value).__name__


def name_ok(name: str) -> bool:
    """A name of letters, digits, '.', '_' and '-' that is not only dots (``.`` and
    ``..`` are no topic, and no directory of their own): a test's, a topic's, a sweep's."""
    return name.strip(".") != "" and all(c.isalnum() or c in "._-" for c in name)


def kafka_version(version: str, option: str = "--kafka-version") -> str:
    """``version`` if it looks like a Kafka release's (4.3.1); else SpecError naming
    ``option``. Every command that takes one checks it here, before any work."""
    if not _KAFKA_VERSION.fullmatch(version):
        raise SpecError(f"{option} must look like 4.3.1, not {version!r}")
    return version


def release(version: str) -> tuple[int, int]:
    """A Kafka version's (major, minor): ``4.1`` of ``4.1.0-rc2``; 0 for a part that is no number."""
    parts = [int(p) if p.isdigit() else 0 for p in version.split(".")[:2]]
    major, minor = [*parts, 0, 0][:2]
    return major, minor


def idempotence_allowed(p: ProducerSpec) -> bool:
    """Whether ``p``'s other settings allow idempotence: acks=all, retries > 0, 1 to 5 in
    flight. Kafka's producer's rule (``ProducerConfig.postProcessAndValidateIdempotenceConfigs``),
    which every spec follows: left unset, ``enable_idempotence`` is this; set true where
    this is false, the spec is refused. (Unset with more than 5 in flight, Kafka's
    producer refuses the config; a spec runs without idempotence.)"""
    return p.acks == "all" and p.retries > 0 and 1 <= p.max_in_flight <= 5


def _at_least(version: str, major: int) -> bool:
    """Whether Kafka ``version`` (already checked by :func:`kafka_version`) is ``major``.0 or later."""
    return int(version.split(".", 1)[0]) >= major


def _broker_config_problem(config: Mapping[str, str]) -> str | None:
    """Why ``config`` cannot go into server.properties, or None: each name must have a Kafka
    setting's shape, and no value may hold a control character (the file is line-based:
    a line break would add a setting no spec shows)."""
    for name, value in config.items():
        if not _SETTING_NAME.fullmatch(name):
            return (f"kafka.broker_config: {name!r} is not a Kafka setting name "
                    "(ASCII letters, digits, '.', '_' and '-')")
        if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in value):
            return (f"kafka.broker_config.{name}: {value!r} holds a control character "
                    "(a line break would add a setting to server.properties)")
    return None


def _validate(spec: TestSpec) -> None:
    """Reject specs that cannot run, one clear message each."""
    k, t, p, w, n = spec.kafka, spec.topic, spec.producer, spec.workload, spec.nemesis
    kafka_version(k.version)
    checks: list[tuple[bool, str]] = [
        (k.nodes in (1, 3, 5), f"--nodes must be 1, 3 or 5, not {k.nodes}"),
        (k.heap_mb >= 256, f"kafka.heap_mb must be at least 256, not {k.heap_mb}"),
        (1 <= t.partitions <= MAX_PARTITIONS,
         f"--partitions must be between 1 and {MAX_PARTITIONS}, not {t.partitions}"),
        (
            1 <= t.replication_factor <= k.nodes,
            f"--replication-factor must be between 1 and the node count {k.nodes}, "
            f"not {t.replication_factor}",
        ),
        (
            1 <= t.min_insync_replicas <= t.replication_factor,
            f"--min-insync must be between 1 and the replication factor "
            f"{t.replication_factor}, not {t.min_insync_replicas}",
        ),
        (p.acks in ACKS, f"--acks must be one of 0, 1, all, not {p.acks!r}"),
        (
            not p.enable_idempotence or idempotence_allowed(p),
            "idempotence needs acks=all, retries > 0 and max_in_flight between 1 and 5; "
            "leave it unset or pass --no-idempotence for other producer settings",
        ),
        (1 <= p.max_in_flight <= MAX_IN_FLIGHT,
         f"producer.max_in_flight must be between 1 and {MAX_IN_FLIGHT}, not {p.max_in_flight}"),
        (0 <= p.retries <= MAX_RETRIES, f"--retries must be between 0 and {MAX_RETRIES}, not {p.retries}"),
        # the clients' own ranges: librdkafka's, and the Java producer's sum rule
        (1 <= p.request_timeout_ms <= 900_000 and 0 <= p.linger_ms <= 900_000
         and p.linger_ms + p.request_timeout_ms <= p.delivery_timeout_ms <= 2**31 - 1,
         "producer timeouts: request_timeout_ms must be 1 to 900000, linger_ms 0 to 900000, and "
         "delivery_timeout_ms at least their sum (and below 2**31), not "
         f"{p.request_timeout_ms}, {p.linger_ms} and {p.delivery_timeout_ms}"),
        (0 < spec.time_limit_s <= MAX_TIME_LIMIT_S,
         f"--time-limit must be positive and at most {MAX_TIME_LIMIT_S:.0f} (a week), "
         f"not {spec.time_limit_s}"),
        (w.producers >= 1, f"--producers must be at least 1, not {w.producers}"),
        (w.consumers >= 0, f"--consumers must be >= 0, not {w.consumers}"),
        (w.rate >= 0, f"--rate must be >= 0 (0: as fast as it goes), not {w.rate}"),
        (n.interval_s >= MIN_INTERVAL_S, f"--interval must be at least {MIN_INTERVAL_S}, not {n.interval_s}"),
        (not n.faults or spec.time_limit_s <= MAX_SCHEDULED_FAULTS * n.interval_s,
         f"--interval must be at least --time-limit / {MAX_SCHEDULED_FAULTS} "
         f"({spec.time_limit_s / MAX_SCHEDULED_FAULTS:g}) with faults, not {n.interval_s}"),
        (n.max_concurrent >= 1, f"nemesis.max_concurrent must be at least 1, not {n.max_concurrent}"),
        (n.link_loss_percent is None or 0 < n.link_loss_percent <= 100,
         f"nemesis.link_loss_percent must be above 0 and at most 100, not {n.link_loss_percent}"),
        (n.link_rate_kbit is None or n.link_rate_kbit > 0,
         f"nemesis.link_rate_kbit must be positive, not {n.link_rate_kbit}"),
        (0 <= spec.seed <= MAX_SEED, f"--seed must be between 0 and {MAX_SEED}, not {spec.seed}"),
        (name_ok(t.name) and t.name.isascii() and len(t.name) <= MAX_TOPIC_NAME,
         f"topic name {t.name!r} may hold only ASCII letters, digits, '.', '_' and '-' "
         f"(at most {MAX_TOPIC_NAME}, not only dots), as Kafka's topic names"),
        (name_ok(spec.name),
         f"test name {spec.name!r} may hold only letters, digits, '.', '_' and '-' (not only dots)"),
        (k.image is None or (len(k.image) <= 255 and _IMAGE.fullmatch(k.image) is not None),
         f"--image {k.image!r} is not a docker image reference "
         "(like faultline/kafka:4.3.1 or registry.example:5000/team/kafka@sha256:...)"),
    ]
    problem = _broker_config_problem(k.broker_config)
    checks.append((problem is None, problem or ""))
    checks += _transaction_checks(spec)
    unknown_faults = [f for f in n.faults if f not in FAULTS]
    checks.append(
        (not unknown_faults,
         f"unknown fault(s) {', '.join(unknown_faults)}; known: {', '.join(FAULTS)}")
    )
    checks.append(((w.name == "group") == (spec.consumer.mode == "subscribe"),
                   f"workload {w.name} needs consumer.mode "
                   f"{'subscribe' if w.name == 'group' else 'assign'}, not {spec.consumer.mode}: "
                   "the group workload's consumers subscribe, the others' assign"))
    checks.append((spec.consumer.group_protocol == "classic" or _at_least(k.version, 4),
                   f"consumer.group_protocol consumer (KIP-848) needs Kafka 4.0 or later, not {k.version}"))
    checks.append((w.name != "group" or w.client != "java" or spec.consumer.commit != "auto",
                   "consumer.commit auto cannot be judged with the Java client, which reports no auto "
                   "commit's outcome; pass consumer.commit sync or async"))
    checks.append((not (n.faults and n.schedule),
                   "nemesis.faults and nemesis.schedule exclude each other: give a seeded mix "
                   "of faults or a targeted schedule"))
    for ok, message in checks:
        if not ok:
            raise SpecError(message)
    for step in parse_schedule(n.schedule, t.partitions, k.nodes):
        if isinstance(step, Wait) and step.clients is not None and w.name != "txn":
            raise SpecError(f"nemesis.schedule {step.text!r}: producers commit transactions in the txn "
                            f"workload only, not the {w.name} workload")
        if step.clients and max(step.clients) >= w.producers:
            raise SpecError(f"nemesis.schedule {step.text!r}: the producers are 0 to {w.producers - 1}")
        if step.consumers is not None and w.name != "group":
            raise SpecError(f"nemesis.schedule {step.text!r}: consumers crash, pause and hold "
                            f"partitions in the group workload only, not the {w.name} workload")
        if step.consumers and max(step.consumers) >= w.consumers:
            raise SpecError(f"nemesis.schedule {step.text!r}: the consumers are 0 to {w.consumers - 1}")


def _transaction_checks(spec: TestSpec) -> list[tuple[bool, str]]:
    """The checks of the cluster's transaction version and of the ``txn`` workload."""
    k, p, x = spec.kafka, spec.producer, spec.transactions
    return [
        (k.transaction_version in (None, 1, 2),
         f"kafka.transaction_version must be 1 or 2 (or unset), not {k.transaction_version}"),
        (k.transaction_version is None or release(k.version) >= (4, 0),
         f"kafka.transaction_version needs Kafka 4.0 or later (Kafka {k.version} formats no "
         "transaction.version); leave it unset"),
        (1 <= x.sends <= MAX_IN_FLIGHT,
         f"transactions.sends must be between 1 and {MAX_IN_FLIGHT}, not {x.sends}"),
        (0.0 <= x.abort_probability <= 1.0,
         f"transactions.abort_probability must be between 0 and 1, not {x.abort_probability}"),
        (x.reads >= 0, f"transactions.reads must be 0 (off) or more, not {x.reads}"),
        (x.gap_ms >= 0 and (x.sends - 1) * x.gap_ms <= MAX_TRANSACTION_GAPS_MS,
         f"transactions.gap_ms must be 0 or more and its {x.sends - 1} gaps a transaction at most "
         f"{MAX_TRANSACTION_GAPS_MS} ms together, not {x.gap_ms} ms each"),
        (x.reads == 0 or spec.workload.name != "txn" or not spec.nemesis.crashes_clients,
         "transactions.reads (read-process-write) cannot run with client crashes: a crashed "
         "transaction's reads would be unknown; drop the clients faults or set transactions.reads 0"),
        (spec.workload.name != "txn" or p.enable_idempotence,
         "the txn workload's transactional producers need idempotence: acks=all, retries > 0 and "
         "max_in_flight between 1 and 5"),
    ]


def build_spec(spec_file: Path | None, overrides: Mapping[str, Any]) -> TestSpec:
    """The spec from ``spec_file`` (YAML or JSON; may be None) with ``overrides`` (nested
    like ``test.json``, None values ignored) merged on top; raises SpecError."""
    base: dict[str, Any] = {}
    source = "options"
    if spec_file is not None:
        source = str(spec_file)
        base = read_yaml_mapping(spec_file, "a mapping of spec keys")
    merged = _merge(base, overrides)
    merged.pop("start_wall_ms", None)  # set when the run starts
    return TestSpec.from_mapping(merged, source=source)


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if v is None:
            continue
        if isinstance(v, Mapping):
            inner = out.get(k, {})
            # a section the file got wrong (``topic: 5``) stays, for validation to name it
            out[k] = _merge(inner, v) if isinstance(inner, Mapping) else inner
        else:
            out[k] = v
    return out
