"""The docker backend's testcontainers wait strategy for what testcontainers' own cannot
reach: imported only where a container starts (testcontainers is an optional install)."""

from __future__ import annotations

from pathlib import Path

from testcontainers.core.waiting_utils import WaitStrategy, WaitStrategyTarget

from faultline.cluster import toxiproxy
from faultline.cluster.host.runstate import ProcId


class ToxiproxyAnswers(WaitStrategy):
    """Ready when the container's Toxiproxy server answers its API. That listens on the
    container's loopback only (:mod:`faultline.cluster.toxiproxy`), out of reach of an
    ``HttpWaitStrategy`` on the host: it is asked from inside the container's network
    namespace. TimeoutError when the container exits at once, ClusterError (with the last
    line of ``log``) when the server exits or does not answer in the startup timeout."""

    def __init__(self, log: Path) -> None:
        super().__init__()
        self._log = log

    def wait_until_ready(self, container: WaitStrategyTarget) -> None:
        container.reload()
        attrs = container.get_wrapped_container().attrs
        proc = ProcId.of(int(attrs["State"]["Pid"]))
        if proc is None:
            raise TimeoutError("the container exited")
        toxiproxy.wait_answers(Path(attrs["NetworkSettings"]["SandboxKey"]), proc.alive, self._log,
                               self._startup_timeout)  # fmt: skip
