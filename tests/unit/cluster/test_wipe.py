"""LocalCluster.wipe (the docker backend's too): a wipe that could not delete everything
says so, so the journal never claims data destroyed that the node still holds."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from faultline.cluster.docker.cluster import DockerCluster
from faultline.cluster.local.cluster import LocalCluster
from faultline.errors import ClusterError
from faultline.spec import TestSpec

BACKENDS = pytest.mark.parametrize("backend", [LocalCluster, DockerCluster])


def _cluster(tmp_path: Path, backend: type[LocalCluster]) -> tuple[LocalCluster, Path]:
    """A cluster whose node 1 is down, its data directory formatted and holding two
    partition logs and a checkpoint, beside its formatted storage."""
    cluster = backend(TestSpec())
    cluster._state = SimpleNamespace(nodes={}, workdir=str(tmp_path))  # type: ignore[assignment]
    data = cluster.data_dir(1)
    for name in ("fl-queue-0", "fl-queue-1"):
        (data / name).mkdir(parents=True)
        (data / name / "00000000000000000000.log").write_bytes(b"records")
    (data / "meta.properties").write_text("node.id=1\n")
    (data / "bootstrap.checkpoint").write_bytes(b"bootstrap records")
    (data / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    return cluster, data


@BACKENDS
def test_a_wipe_deletes_the_partition_logs_and_keeps_the_formatted_storage(
        tmp_path: Path, backend: type[LocalCluster]) -> None:
    cluster, data = _cluster(tmp_path, backend)
    cluster.wipe(1)
    assert sorted(p.name for p in data.iterdir()) == ["bootstrap.checkpoint", "meta.properties"]


@BACKENDS
def test_a_wipe_that_could_not_delete_a_partition_log_raises(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: type[LocalCluster]) -> None:
    """Found by review: the partition directories went with ``rmtree(ignore_errors=True)``,
    so a wipe that deleted nothing (a file held, an I/O error, a root-owned file under a
    non-root harness) returned as done: the nemesis journaled "deleted its partition data"
    and the checker excused the node's lost writes as destroyed data."""
    cluster, data = _cluster(tmp_path, backend)
    real = shutil.rmtree

    def rmtree(path: Any, ignore_errors: bool = False, **kwargs: Any) -> None:
        if Path(path).name == "fl-queue-0":  # fails as the real one would, and is silent when told
            if not ignore_errors:
                raise PermissionError(13, "Permission denied", str(path))
            return
        real(path, ignore_errors=ignore_errors, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    with pytest.raises(ClusterError, match=r"node 1.s wipe could not delete fl-queue-0: .*Permission denied"):
        cluster.wipe(1)
    assert not (data / "fl-queue-1").exists(), "what can go still goes"
    assert (data / "fl-queue-0").exists()


@BACKENDS
def test_a_wipe_deletes_everything_else_before_it_raises(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: type[LocalCluster]) -> None:
    """Whichever entry it meets first cannot go, the rest of the partition data still goes
    (the directory's order is the filesystem's)."""
    cluster, data = _cluster(tmp_path, backend)
    real = shutil.rmtree
    held: list[str] = []

    def rmtree(path: Any, ignore_errors: bool = False, **kwargs: Any) -> None:
        if not held:  # the first directory asked for
            held.append(Path(path).name)
            raise PermissionError(13, "Permission denied", str(path))
        real(path, ignore_errors=ignore_errors, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    with pytest.raises(ClusterError, match=r"could not delete fl-queue-[01]: "):
        cluster.wipe(1)
    left = sorted(p.name for p in data.iterdir())
    assert left == sorted([*held, "bootstrap.checkpoint", "meta.properties"])
