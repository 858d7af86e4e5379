"""A node's ``server.properties`` and JVM options, as pure functions of the spec.

Listeners of node ``i`` (address ``A``, its proxy at ``X:P``)::

    BROKER://A:9092      inter-broker replication
    CONTROLLER://A:9093  KRaft quorum (static voters: every node is a voter)
    CLIENT://A:9094      clients, advertised as CLIENT://X:P, i.e. the proxy

so the metadata a client gets back names proxies only, and no client can bypass them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from faultline.spec import GROUP_HEARTBEAT_INTERVAL_MS, GROUP_SESSION_TIMEOUT_MS, KafkaSpec

BROKER_PORT = 9092
CONTROLLER_PORT = 9093
CLIENT_PORT = 9094
#: The broker's KIP-848 group settings (Kafka's GroupCoordinatorConfig), each minimum
#: lowered to the value: it refuses a session timeout below ``min.session.timeout.ms``
#: (45 s by default) or a heartbeat interval below ``min.heartbeat.interval.ms`` (5 s).
GROUP_CONSUMER_SETTINGS: Mapping[str, str] = {
    "group.consumer.session.timeout.ms": str(GROUP_SESSION_TIMEOUT_MS),
    "group.consumer.min.session.timeout.ms": str(GROUP_SESSION_TIMEOUT_MS),
    "group.consumer.heartbeat.interval.ms": str(GROUP_HEARTBEAT_INTERVAL_MS),
    "group.consumer.min.heartbeat.interval.ms": str(GROUP_HEARTBEAT_INTERVAL_MS),
}


def server_properties(
    kafka: KafkaSpec,
    node_id: int,
    addresses: Mapping[int, str],
    proxy: str,
    data_dir: Path,
    metadata_dir: Path,
) -> dict[str, str]:
    """The broker+controller config of ``node_id``; ``addresses`` maps every node id to
    its address, ``proxy`` is the ``host:port`` of the node's proxy. ``kafka.broker_config``
    is applied last and wins."""
    address = addresses[node_id]
    n = len(addresses)
    voters = ",".join(f"{i}@{a}:{CONTROLLER_PORT}" for i, a in sorted(addresses.items()))
    props: dict[str, str] = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "listeners": (
            f"BROKER://{address}:{BROKER_PORT},CONTROLLER://{address}:{CONTROLLER_PORT},"
            f"CLIENT://{address}:{CLIENT_PORT}"
        ),
        "advertised.listeners": f"BROKER://{address}:{BROKER_PORT},CLIENT://{proxy}",
        "listener.security.protocol.map": "BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT,CLIENT:PLAINTEXT",
        "inter.broker.listener.name": "BROKER",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": str(data_dir),
        "metadata.log.dir": str(metadata_dir),
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        # 50 offsets partitions (the default) cost a small cluster seconds of start-up
        # CPU the first time any client names a group; the tests need few.
        "offsets.topic.num.partitions": "5",
        "offsets.topic.replication.factor": str(kafka.internal_replication_factor),
        "transaction.state.log.replication.factor": str(kafka.internal_replication_factor),
        "transaction.state.log.min.isr": str(min(2, n)),
        "share.coordinator.state.topic.replication.factor": str(kafka.internal_replication_factor),
        "share.coordinator.state.topic.min.isr": str(min(2, n)),
        "group.initial.rebalance.delay.ms": "0",
        "num.network.threads": "2",
        "num.io.threads": "4",
        "replica.lag.time.max.ms": str(kafka.replica_lag_time_max_ms),
        "broker.session.timeout.ms": str(kafka.broker_session_timeout_ms),
        "broker.heartbeat.interval.ms": str(kafka.broker_heartbeat_interval_ms),
        **GROUP_CONSUMER_SETTINGS,
    }
    if kafka.log_flush_interval_messages is not None:
        props["log.flush.interval.messages"] = str(kafka.log_flush_interval_messages)
    props.update({str(k): str(v) for k, v in kafka.broker_config.items()})
    return props


def render_properties(props: Mapping[str, str]) -> str:
    """``key=value`` lines, sorted, escaped as ``java.util.Properties.store`` escapes them
    (Kafka reads the file with ``Properties.load``): whatever a key or value holds, each is
    read back as it was, and each setting is one line."""
    return "".join(f"{_escape(k, key=True)}={_escape(v, key=False)}\n" for k, v in sorted(props.items()))


_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f",
            "=": "\\=", ":": "\\:", "#": "\\#", "!": "\\!"}


def _escape(text: str, *, key: bool) -> str:
    out = []
    for i, c in enumerate(text):
        if c == " " and (key or i == 0):  # a key's spaces end it; a value's leading ones are dropped
            out.append("\\ ")
        elif c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif not " " <= c <= "~":  # the file is read as ISO 8859-1: the rest as UTF-16 units
            units = c.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{units[j]:02x}{units[j + 1]:02x}" for j in range(0, len(units), 2))
        else:
            out.append(c)
    return "".join(out)


def jvm_options(heap_mb: int, log_dir: Path, log4j_config: Path, run_id: str) -> list[str]:
    """JVM flags for a broker: a fixed small heap, G1 as Kafka's own scripts use it, and
    C1-only JIT, which starts a JVM markedly faster on a busy machine.

    ``-Dfaultline.run`` marks the process as the run's, for ``ps`` and leftovers.
    """
    return [
        f"-Xms{heap_mb}m",
        f"-Xmx{heap_mb}m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:InitiatingHeapOccupancyPercent=35",
        "-XX:+ExplicitGCInvokesConcurrent",
        "-XX:TieredStopAtLevel=1",
        "-Xshare:auto",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        "-Djava.net.preferIPv4Stack=true",
        f"-Dkafka.logs.dir={log_dir}",
        f"-Dlog4j2.configurationFile={log4j_config}",
        f"-Dfaultline.run={run_id}",
    ]


def format_features(kafka: KafkaSpec) -> list[str]:
    """The StorageTool ``format`` options that set the spec's feature levels: the
    ``transaction.version`` when the spec names one (none otherwise: the version's default)."""
    if kafka.transaction_version is None:
        return []
    return [f"--feature=transaction.version={kafka.transaction_version}"]


def tool_options() -> list[str]:
    """JVM flags for short-lived tools (StorageTool): start fast, stay small."""
    return ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
            "-Djava.awt.headless=true", "-Dlog4j2.level=WARN"]  # fmt: skip
