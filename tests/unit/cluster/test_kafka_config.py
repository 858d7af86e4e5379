"""Rendering of a node's server.properties and JVM flags from the spec."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from faultline.cluster import kafka_config
from faultline.spec import GROUP_HEARTBEAT_INTERVAL_MS, GROUP_SESSION_TIMEOUT_MS, KafkaSpec

ADDRS = {1: "10.241.7.11", 2: "10.241.7.12", 3: "10.241.7.13"}


def _props(spec: KafkaSpec | None = None, node: int = 2) -> dict[str, str]:
    return kafka_config.server_properties(
        spec or KafkaSpec(), node, ADDRS, "10.241.7.2:40002", Path("/w/n2/data"), Path("/w/n2/metadata")
    )


def test_listeners_and_the_client_listener_advertises_the_proxy() -> None:
    p = _props()
    assert p["process.roles"] == "broker,controller"
    assert p["node.id"] == "2"
    assert p["listeners"] == (
        "BROKER://10.241.7.12:9092,CONTROLLER://10.241.7.12:9093,CLIENT://10.241.7.12:9094"
    )
    assert p["advertised.listeners"] == "BROKER://10.241.7.12:9092,CLIENT://10.241.7.2:40002"
    assert p["controller.quorum.voters"] == "1@10.241.7.11:9093,2@10.241.7.12:9093,3@10.241.7.13:9093"
    assert p["inter.broker.listener.name"] == "BROKER"
    assert p["controller.listener.names"] == "CONTROLLER"
    assert p["log.dirs"] == "/w/n2/data" and p["metadata.log.dir"] == "/w/n2/metadata"


def test_timeouts_come_from_the_spec_and_overrides_win() -> None:
    spec = KafkaSpec(replica_lag_time_max_ms=1234, broker_session_timeout_ms=4321,
                     broker_heartbeat_interval_ms=321, log_flush_interval_messages=1,
                     broker_config={"replica.lag.time.max.ms": "999", "num.io.threads": "2"})
    p = _props(spec)
    assert p["replica.lag.time.max.ms"] == "999"
    assert p["broker.session.timeout.ms"] == "4321"
    assert p["broker.heartbeat.interval.ms"] == "321"
    assert p["log.flush.interval.messages"] == "1"
    assert p["num.io.threads"] == "2"
    assert "log.flush.interval.messages" not in _props()


def test_kip_848_members_get_the_classic_members_session_and_heartbeat() -> None:
    p = _props()
    session, heartbeat = GROUP_SESSION_TIMEOUT_MS, GROUP_HEARTBEAT_INTERVAL_MS
    assert int(p["group.consumer.session.timeout.ms"]) == session == 6000
    assert int(p["group.consumer.heartbeat.interval.ms"]) == heartbeat == 1000
    # GroupCoordinatorConfig's bounds: min <= session <= max (60 s), min <= heartbeat
    # <= max (15 s), heartbeat < session
    assert int(p["group.consumer.min.session.timeout.ms"]) <= session <= 60_000
    assert int(p["group.consumer.min.heartbeat.interval.ms"]) <= heartbeat <= 15_000 and heartbeat < session


def test_internal_topics_fit_a_small_cluster() -> None:
    one = kafka_config.server_properties(KafkaSpec(nodes=1), 1, {1: "10.0.0.11"}, 1, Path("d"), Path("m"))
    assert one["offsets.topic.replication.factor"] == "1"
    assert one["transaction.state.log.min.isr"] == "1"
    assert _props()["offsets.topic.replication.factor"] == "3"


def test_render_escapes_and_sorts() -> None:
    text = kafka_config.render_properties({"b": "x=y:z", "a": "C:\\dir\nnext"})
    assert text == "a=C\\:\\\\dir\\nnext\nb=x\\=y\\:z\n"


#: Loads a file as Kafka loads server.properties (Properties.load of its bytes) and prints
#: each setting as its key's and value's UTF-8 in hex.
_LOAD = """
import java.nio.file.*; import java.util.*;
class Load { public static void main(String[] a) throws Exception {
  Properties p = new Properties(); p.load(Files.newInputStream(Path.of(a[0])));
  HexFormat h = HexFormat.of();
  for (String k : new TreeSet<>(p.stringPropertyNames()))
    System.out.println(h.formatHex(k.getBytes("UTF-8")) + " "
                       + h.formatHex(p.getProperty(k).getBytes("UTF-8")));
} }
"""


def test_java_reads_back_every_setting_as_written(tmp_path: Path) -> None:
    """Issue 41: a carriage return in a value ended its line, and Kafka read what followed
    as a setting of its own."""
    props = {"log.dir": "x\r\nzookeeper.connect=evil", "a": "\t\f#!=: \\ end", " lead": "  two",
             "k=:#! \t": "v", "non.latin": "é€😀", "empty": "", "nul": "\x00\x7f"}
    (tmp_path / "server.properties").write_text(kafka_config.render_properties(props), encoding="ascii")
    (tmp_path / "Load.java").write_text(_LOAD)
    java = shutil.which("java")
    assert java, "java is not on PATH (make setup installs it)"
    out = subprocess.run([java, str(tmp_path / "Load.java"), str(tmp_path / "server.properties")],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    read = dict(line.split(" ") for line in out.splitlines())
    assert {bytes.fromhex(k).decode(): bytes.fromhex(v).decode() for k, v in read.items()} == props


def test_jvm_options_heap_and_markers() -> None:
    opts = kafka_config.jvm_options(384, Path("/w/logs"), Path("/pkg/log4j2.properties"), "abc123")
    assert "-Xmx384m" in opts and "-Xms384m" in opts
    assert "-Dkafka.logs.dir=/w/logs" in opts
    assert "-Dlog4j2.configurationFile=/pkg/log4j2.properties" in opts
    assert "-Dfaultline.run=abc123" in opts


def test_the_format_sets_the_transaction_version_only_when_the_spec_names_one() -> None:
    assert kafka_config.format_features(KafkaSpec()) == []
    assert kafka_config.format_features(KafkaSpec(transaction_version=2)) == [
        "--feature=transaction.version=2"]
