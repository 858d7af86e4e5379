"""A Toxiproxy server per run, and a client for it.

toxiproxy-python keeps the server's host and port on the class-global
``toxiproxy.api.APIConsumer`` and sends requests without timeouts, so one process
cannot talk to several servers (concurrent runs, a test's own cluster next to a
session one) and a hung server hangs the harness. :class:`ToxiproxyClient` adds only
that: one object per server, every request with a timeout. It keeps the library's
response handling (``validate_response`` and its ``ProxyExists`` / ``NotFound`` /
``InvalidToxic`` errors) and returns its ``Toxic`` objects.

Toxiproxy's API has no authentication: whoever reaches it can add toxics and falsify a
run. So a run's server listens for its API on the loopback of a network namespace of
the run's own (:data:`API_PORT`), which only a process inside it reaches (entering one
takes ``CAP_SYS_ADMIN``); the client makes its requests from a thread of its own that
entered that namespace (:func:`enter_namespace`). Its proxies listen on an address of
that namespace which the host routes to.
"""

from __future__ import annotations

import ctypes
import functools
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from toxiproxy.api import validate_response
from toxiproxy.toxic import Toxic

from faultline.cluster.waiting import wait_until
from faultline.errors import ClusterError

TOXIPROXY_KINDS = ("latency", "bandwidth", "slow_close", "timeout", "reset_peer", "slicer", "limit_data")
STREAMS = ("upstream", "downstream")
#: The API's port, on the loopback of the server's own network namespace.
API_PORT = 8474
_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


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

    Every request is made from one thread of the client's own, in network namespace
    ``netns`` (the path of a namespace file) when given, else in this process's.
    Errors from the server come out as toxiproxy-python's exceptions; a server that does
    not answer, or a namespace that cannot be entered, raises :class:`ClusterError`.
    """

    def __init__(self, host: str, port: int, timeout: float = 5.0, *, netns: Path | None = None) -> None:
        self.base = f"http://{host}:{port}"
        self.timeout = timeout
        self.netns = netns
        self._session = requests.Session()
        self._worker = ThreadPoolExecutor(1, "toxiproxy-client")
        self._entered = False  # whether the worker thread is in ``netns``

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        where = self.base if self.netns is None else f"{self.base} in {self.netns}"
        try:
            response = self._worker.submit(self._request, method, path, body).result()
        except requests.RequestException as e:
            raise ClusterError(f"toxiproxy at {where} did not answer {method} {path}: {e}") from e
        except OSError as e:
            raise ClusterError(f"toxiproxy at {where}: its namespace could not be entered: {e}") from e
        validate_response(response)
        if response.status_code >= 300:
            raise ClusterError(f"toxiproxy {method} {path}: {response.status_code} {response.text.strip()}")
        return response.json() if response.content else None

    def _request(self, method: str, path: str, body: Mapping[str, Any] | None) -> requests.Response:
        """One request, on the worker thread (which enters ``netns`` first, once)."""
        if not self._entered:
            enter_namespace(self.netns)
            self._entered = True
        return self._session.request(method, self.base + path, json=body, timeout=self.timeout)

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
        if kind not in TOXIPROXY_KINDS:
            raise ValueError(f"unknown toxic {kind!r}; known: {', '.join(TOXIPROXY_KINDS)}")
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
        """Wait for the request under way, if any, and close the connections."""
        self._worker.shutdown()
        self._session.close()


def enter_namespace(netns: Path | None) -> None:
    """Move the calling thread (only it) into network namespace ``netns`` (a namespace
    file: ``/run/netns/<name>``, ``/proc/<pid>/ns/net``); None leaves it where it is.
    Sockets it creates from then on are that namespace's. OSError if it cannot."""
    if netns is None:
        return
    fd = os.open(netns, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(fd, _CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns into {netns}: {os.strerror(errno)}")
    finally:
        os.close(fd)


def _proxy(data: Mapping[str, Any]) -> ProxyInfo:
    return ProxyInfo(
        name=str(data["name"]),
        listen=str(data["listen"]),
        upstream=str(data["upstream"]),
        enabled=bool(data["enabled"]),
    )


def start_server(binary: Path, namespace: str, log: Path, env: Mapping[str, str],
                 timeout: float = 10.0) -> subprocess.Popen[bytes]:
    """Start a Toxiproxy server inside network namespace ``namespace`` (``ip netns``), in
    its own process group, its API on that namespace's loopback port :data:`API_PORT`;
    return it once :func:`wait_answers` says so."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", namespace, str(binary), "-host", "127.0.0.1", "-port", str(API_PORT)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, env={**os.environ, **env},
        )  # fmt: skip
    try:
        wait_answers(Path("/run/netns") / namespace, lambda: proc.poll() is None, log, timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc


def wait_answers(netns: Path, alive: Callable[[], bool], log: Path, timeout: float = 10.0) -> None:
    """Wait until the server in ``netns`` answers ``/version`` on :data:`API_PORT`;
    ClusterError, with the last line of its ``log``, if it exits (``alive`` false) or does
    not answer within ``timeout`` seconds."""
    client = ToxiproxyClient("127.0.0.1", API_PORT, timeout=1.0, netns=netns)
    errors: list[str] = []
    try:
        if wait_until(functools.partial(_answers, alive, client, errors), time.monotonic() + timeout) \
                and alive():
            return
    finally:
        client.close()
    lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
    last = lines[-1] if lines else errors[-1] if errors else "it exited"
    raise ClusterError(f"toxiproxy server in {netns} never answered: {last}")


def _answers(alive: Callable[[], bool], client: ToxiproxyClient, errors: list[str]) -> bool:
    """Whether the server answers ``/version`` (or died, when waiting is no use); its
    errors go to ``errors``."""
    if not alive():
        return True
    try:
        client.version()
        return True
    except ClusterError as e:
        errors.append(str(e))
        return False
