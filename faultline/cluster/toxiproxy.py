"""A Toxiproxy server per run, and a client for it.

toxiproxy-python keeps the server's host and port on the class-global
``toxiproxy.api.APIConsumer`` and sends requests without timeouts, so one process
cannot talk to several servers (concurrent runs, a test's own cluster next to a
session one) and a hung server hangs the harness. :class:`ToxiproxyClient` adds only
that: one object per server, every request with a timeout. It keeps the library's
response handling (``validate_response`` and its ``ProxyExists`` / ``NotFound`` /
``InvalidToxic`` errors) and returns its ``Toxic`` objects.
"""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from toxiproxy.api import validate_response
from toxiproxy.toxic import Toxic

from faultline.cluster.waiting import wait_until
from faultline.errors import ClusterError

TOXIC_KINDS = ("latency", "bandwidth", "slow_close", "timeout", "reset_peer", "slicer", "limit_data")
STREAMS = ("upstream", "downstream")


@dataclass(frozen=True, slots=True)
class ProxyInfo:
    """A proxy as the server reports it; ``listen`` is the real ``host:port``."""

    name: str
    listen: str
    upstream: str
    enabled: bool

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])


class ToxiproxyClient:
    """Talks to one Toxiproxy server; every call times out after ``timeout`` seconds.

    Errors from the server come out as toxiproxy-python's exceptions; a server that does
    not answer raises :class:`ClusterError`.
    """

    def __init__(self, host: str, port: int, timeout: float = 5.0) -> None:
        self.base = f"http://{host}:{port}"
        self.timeout = timeout
        self._session = requests.Session()

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        try:
            response = self._session.request(
                method, self.base + path, json=body, timeout=self.timeout
            )
        except requests.RequestException as e:
            raise ClusterError(f"toxiproxy at {self.base} did not answer {method} {path}: {e}") from e
        validate_response(response)
        if response.status_code >= 300:
            raise ClusterError(f"toxiproxy {method} {path}: {response.status_code} {response.text.strip()}")
        return response.json() if response.content else None

    def version(self) -> str:
        return str(self._call("GET", "/version") or "")

    def create_proxy(self, name: str, listen: str, upstream: str) -> ProxyInfo:
        """Create a proxy; ``listen`` may use port 0, the answer holds the port it got."""
        data = self._call(
            "POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": True}
        )
        return _proxy(data)

    def proxies(self) -> dict[str, ProxyInfo]:
        return {name: _proxy(p) for name, p in (self._call("GET", "/proxies") or {}).items()}

    def add_toxic(
        self,
        proxy: str,
        kind: str,
        attributes: Mapping[str, int | float],
        *,
        stream: str = "downstream",
        toxicity: float = 1.0,
        name: str | None = None,
    ) -> Toxic:
        """Add a toxic to ``proxy``; its name defaults to ``<kind>_<stream>``."""
        if kind not in TOXIC_KINDS:
            raise ValueError(f"unknown toxic {kind!r}; known: {', '.join(TOXIC_KINDS)}")
        if stream not in STREAMS:
            raise ValueError(f"stream must be upstream or downstream, not {stream!r}")
        body = {
            "name": name or f"{kind}_{stream}",
            "type": kind,
            "stream": stream,
            "toxicity": toxicity,
            "attributes": dict(attributes),
        }
        data = self._call("POST", f"/proxies/{proxy}/toxics", body)
        return Toxic(**data)

    def toxics(self, proxy: str) -> list[Toxic]:
        return [Toxic(**t) for t in self._call("GET", f"/proxies/{proxy}/toxics") or []]

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def reset(self) -> None:
        """Enable every proxy and remove every toxic (Toxiproxy's ``/reset``)."""
        self._call("POST", "/reset")

    def close(self) -> None:
        self._session.close()


def _proxy(data: Mapping[str, Any]) -> ProxyInfo:
    return ProxyInfo(
        name=str(data["name"]),
        listen=str(data["listen"]),
        upstream=str(data["upstream"]),
        enabled=bool(data["enabled"]),
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (the caller retries if it is taken meanwhile)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def start_server(
    binary: Path, log: Path, env: Mapping[str, str], timeout: float = 10.0, attempts: int = 3
) -> tuple[subprocess.Popen[bytes], int]:
    """Start a Toxiproxy server on a free loopback port in its own process group.

    Returns the process and its API port once ``/version`` answers.
    """
    last = ""
    for _ in range(attempts):
        port = free_port()
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [str(binary), "-host", "127.0.0.1", "-port", str(port)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env={**os.environ, **env},
            )  # fmt: skip
        client = ToxiproxyClient("127.0.0.1", port, timeout=1.0)
        errors: list[str] = []
        try:
            if wait_until(functools.partial(_answers, proc, client, errors),
                          time.monotonic() + timeout) and proc.poll() is None:
                return proc, port
        finally:
            client.close()
        last = errors[-1] if errors else last
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
        last = lines[-1] if lines else last
    raise ClusterError(f"toxiproxy server never answered on a loopback port: {last}")


def _answers(proc: subprocess.Popen[bytes], client: ToxiproxyClient, errors: list[str]) -> bool:
    """Whether the server answers ``/version`` (or died, when waiting is no use); its
    errors go to ``errors``."""
    if proc.poll() is not None:
        return True
    try:
        client.version()
        return True
    except ClusterError as e:
        errors.append(str(e))
        return False
