"""What another local user reaches: a process's listening sockets, probed as nobody."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
from pathlib import Path

from faultline.cluster.local.cluster import LocalCluster

#: An HTTP GET of ``/version`` to each ``host:port`` argument; prints, as JSON, the first
#: line of each answer, or how the attempt ended.
_GET = """
import json, socket, sys
out = []
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2) as s:
            s.sendall(b"GET /version HTTP/1.0\\r\\n\\r\\n")
            out.append(s.recv(200).decode(errors="replace").split("\\r\\n")[0] or "closed")
    except OSError as e:
        out.append(type(e).__name__)
print(json.dumps(out))
"""


def listening(pid: int) -> list[str]:
    """``host:port`` of every TCP socket process ``pid`` listens on (IPv4), as its own
    network namespace names them."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            inodes.add(os.readlink(fd))
        except FileNotFoundError:  # closed since it was listed: not a listening socket
            continue
    out = []
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        address, port = fields[1].split(":")
        if fields[3] == "0A" and f"socket:[{fields[9]}]" in inodes:  # 0A: LISTEN
            out.append(f"{socket.inet_ntoa(struct.pack('<I', int(address, 16)))}:{int(port, 16)}")
    return sorted(out)


def http_get_as_nobody(targets: list[str]) -> dict[str, str]:
    """target -> the first line of the answer to ``GET /version`` sent from the host's
    network namespace by user and group 65534 with no other groups (or how it failed)."""
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", _GET,
         *targets], capture_output=True, text=True, timeout=60, check=True, cwd="/",
    )  # fmt: skip
    return dict(zip(targets, json.loads(done.stdout), strict=True))


def assert_toxiproxy_out_of_reach(cluster: LocalCluster) -> None:
    """Toxiproxy has no authentication: as nobody, no socket the run's server listens on
    (its API and a proxy per node) answers its API; the harness still adds and removes
    toxics through it."""
    assert cluster.state.toxiproxy is not None
    sockets = listening(cluster.state.toxiproxy.pid)
    assert len(sockets) == 1 + len(cluster.node_ids), sockets
    answers = http_get_as_nobody(sockets)
    assert not any(a.startswith("HTTP/") for a in answers.values()), answers
    name = cluster.add_toxic(1, "latency", {"latency": 10})
    assert [t.name for t in cluster.toxiproxy.toxics("n1")] == [name]
    cluster.remove_toxic(1, name)
    assert cluster.toxiproxy.toxics("n1") == []
