"""Backends and workloads by name: the runner gets its cluster from ``spec.backend`` and
its clients from ``spec.workload.name``, and a name this installation lacks is one clear
error before anything is written."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultline.cli import main
from faultline.cluster import backends
from faultline.cluster.backends import cluster_for
from faultline.cluster.docker.cluster import DockerCluster
from faultline.cluster.local.cluster import LocalCluster
from faultline.errors import SpecError
from faultline.run.runner import run_test
from faultline.spec import TestSpec, WorkloadSpec
from faultline.workloads import workload_for
from faultline.workloads.queue import QueueWorkload


def test_the_local_backend_is_the_default() -> None:
    assert cluster_for(TestSpec()) is LocalCluster
    assert cluster_for(replace(TestSpec(), backend="docker")) is DockerCluster


@pytest.fixture
def local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """An installation with the local backend alone."""
    monkeypatch.setattr(backends, "BACKENDS", {"local": LocalCluster})


@pytest.mark.usefixtures("local_only")
def test_a_backend_not_installed_is_refused_before_the_run_directory(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="backend 'docker' is not available; backends: local"):
        run_test(replace(TestSpec(), backend="docker"), results=tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("local_only")
def test_through_the_cli_it_is_one_line_and_exit_2(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("backend: docker\n")
    r = CliRunner().invoke(main, ["run", "-f", str(spec), "--results", str(tmp_path / "r")])
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == [
        "faultline: error: backend 'docker' is not available; backends: local"]
    assert not (tmp_path / "r").exists()


def test_the_queue_workload_is_the_default() -> None:
    assert workload_for(TestSpec()) is QueueWorkload


def test_a_workload_not_installed_is_refused_before_the_run_directory(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="workload 'bank' is not available; workloads: queue"):
        run_test(replace(TestSpec(), workload=WorkloadSpec(name="bank")), results=tmp_path)
    assert list(tmp_path.iterdir()) == []
