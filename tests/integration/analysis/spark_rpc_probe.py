"""A Spark RPC request with no credentials, stdlib only: ``python3 spark_rpc_probe.py HOST PORT``.

It asks the driver's ``endpoint-verifier`` endpoint about a String (a message it has no case
for) in Spark's transport framing, and prints ``reached`` when the request was dispatched
to the endpoint (the driver answered with its "Unsupported message" failure), else
``refused: `` and what the driver said (or that it closed the connection). Run by
another user, ``reached`` means any local user can drive the driver's RPC.
"""

from __future__ import annotations

import socket
import struct
import sys

RPC_REQUEST, RPC_RESPONSE = 3, 4


def _utf(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">H", len(data)) + data


def request(host: str, port: int) -> bytes:
    """One RpcRequest frame holding a RequestMessage: no sender, the receiver
    ``endpoint-verifier`` at host:port, and a Java-serialized String as its content."""
    body = (b"\x00" + b"\x01" + _utf(host) + struct.pack(">i", port) + _utf("endpoint-verifier")
            + b"\xac\xed\x00\x05" + b"\x74" + _utf("probe"))
    header = struct.pack(">bqi", RPC_REQUEST, 1, len(body))
    return struct.pack(">q", 8 + len(header) + len(body)) + header + body


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the driver closed the connection")
        data += chunk
    return data


def probe(host: str, port: int) -> str:
    """``reached`` or ``refused: <why>``."""
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(request(host, port))
        try:
            (length,) = struct.unpack(">q", _read(sock, 8))
            frame = _read(sock, length - 8)
        except (ConnectionError, OSError) as e:
            return f"refused: {e}"
    if frame[0] == RPC_RESPONSE:
        return "reached"
    return f"refused: message type {frame[0]}: {frame[13:].decode('utf-8', 'replace')[:300]}"


if __name__ == "__main__":
    print(probe(sys.argv[1], int(sys.argv[2])))
