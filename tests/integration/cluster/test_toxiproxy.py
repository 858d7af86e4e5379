"""The Toxiproxy client against real servers, each in a network namespace of its own:
two servers at once, proxies on port 0, toxics, and the library's errors."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from toxiproxy.exceptions import NotFound, ProxyExists

from faultline.cluster import kafka_dist
from faultline.cluster.toxiproxy import API_PORT, ToxiproxyClient, start_server
from faultline.errors import ClusterError

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("local_backend")]


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[ToxiproxyClient]]:
    binary = kafka_dist.toxiproxy_path()
    namespaces = [f"tp{i}-test-{os.getpid()}" for i in range(2)]  # no run's name: cleanup leaves them
    procs, clients = [], []
    try:
        for i, ns in enumerate(namespaces):
            subprocess.run(["ip", "netns", "add", ns], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
            procs.append(start_server(binary, ns, tmp_path / f"tp{i}.log", {"FAULTLINE_TEST": "1"}))
            clients.append(ToxiproxyClient("127.0.0.1", API_PORT, timeout=2, netns=Path("/run/netns") / ns))
        yield clients
    finally:
        for c in clients:
            c.close()
        for p in procs:
            p.kill()
            p.wait()
        for ns in namespaces:
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True, check=False)


def test_two_servers_proxies_and_toxics(servers: list[ToxiproxyClient]) -> None:
    a, b = servers
    assert a.netns != b.netns and a.version() and b.version()
    info = a.create_proxy("n1", "127.0.0.1:0", "127.0.0.1:9")
    assert info.port > 0 and a.proxies()["n1"].listen == info.listen
    assert b.proxies() == {}  # the servers are independent: no class-global host/port
    with pytest.raises(ProxyExists):
        a.create_proxy("n1", "127.0.0.1:0", "127.0.0.1:9")
    toxic = a.add_toxic("n1", "latency", {"latency": 100}, name="slow")
    assert (toxic.name, toxic.type, toxic.attributes["latency"]) == ("slow", "latency", 100)
    assert [t.name for t in a.toxics("n1")] == ["slow"]
    a.remove_toxic("n1", "slow")
    with pytest.raises(NotFound):
        a.remove_toxic("n1", "slow")
    a.add_toxic("n1", "reset_peer", {"timeout": 0}, stream="upstream")
    a.reset()
    assert a.toxics("n1") == []
    with pytest.raises(ValueError):
        a.add_toxic("n1", "no-such-toxic", {})


def test_a_server_that_does_not_answer_times_out_with_a_clear_error() -> None:
    with socket.socket() as s:  # listens, never answers
        s.bind(("127.0.0.1", 0))
        s.listen()
        client = ToxiproxyClient("127.0.0.1", s.getsockname()[1], timeout=0.3)
        with pytest.raises(ClusterError, match="did not answer"):
            client.version()


def test_a_namespace_that_cannot_be_entered_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "not-a-namespace").touch()
    client = ToxiproxyClient("127.0.0.1", API_PORT, netns=tmp_path / "not-a-namespace")
    with pytest.raises(ClusterError, match=r"could not be entered: .*setns"):
        client.version()
    client.close()
