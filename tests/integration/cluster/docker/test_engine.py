"""Stopping the dockerd faultline started puts the host back as it was before it started:
FORWARD policies, no DOCKER chain or rule, sysctls, no docker0."""

from __future__ import annotations

import subprocess

import pytest

from faultline.cluster.docker import engine
from faultline.cluster.docker.engine import HostState

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300), pytest.mark.usefixtures("docker_engine")]


def _iptables(*args: str) -> str:
    return subprocess.run(["iptables", "-w", "5", *args], capture_output=True, text=True, check=False).stdout


def test_stopping_the_engine_restores_the_host() -> None:
    before = engine.recorded_host_state()
    if before is None:
        pytest.skip("the engine that runs is not one faultline started")
    assert "-P FORWARD DROP" in _iptables("-S", "FORWARD")  # what the engine did
    engine.stop()
    try:
        assert not engine.running()
        assert HostState.read() == before
        for table in ("filter", "nat"):
            assert "DOCKER" not in _iptables("-t", table, "-S")
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True)
        assert "docker0" not in links.stdout
    finally:
        engine.start()  # the session's other tests use it; stopped again at its end
