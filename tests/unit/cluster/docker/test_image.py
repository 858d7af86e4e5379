"""The docker command lines of the image module put ``--`` before the names they pass, so
a name that begins with ``-`` is never read as an option of ``docker`` (issue 41). A
``docker`` of our own on PATH records its arguments (no engine needed)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from faultline.cluster import kafka_dist
from faultline.cluster.docker import image


@pytest.fixture
def docker_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``docker`` on PATH that appends its arguments, one call a line (NUL-separated), and
    fails ``image inspect`` (no image); the file it writes to."""
    calls = tmp_path / "calls"
    fake = tmp_path / "bin" / "docker"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\nprintf "%s\\0" "$@" >> {calls}\necho >> {calls}\ncat > /dev/null\n'
                    '[ "$1" != image ]\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    return calls


def _argv(calls: Path) -> list[list[str]]:
    return [line.strip("\0").split("\0") for line in calls.read_text().splitlines() if line]


def test_inspect_passes_the_image_after_a_double_dash(docker_calls: Path) -> None:
    assert not image.exists("--privileged")
    assert _argv(docker_calls) == [["image", "inspect", "--", "--privileged"]]


@pytest.fixture
def rootfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root filesystem with libfaketime and no more, and Kafka's jars (none), both in
    ``tmp_path``; the library's path."""
    lib = tmp_path / "rootfs" / "usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
    lib.parent.mkdir(parents=True)
    lib.touch()
    (tmp_path / "libs").mkdir()
    monkeypatch.setattr(image, "rootfs", lambda report: tmp_path / "rootfs")
    monkeypatch.setattr(kafka_dist, "ensure_kafka", lambda version, home, report: kafka_dist.KafkaDist(
        version, tmp_path / "libs", Path("java")))
    return lib


@pytest.mark.usefixtures("rootfs")
def test_import_passes_its_file_and_name_after_a_double_dash(docker_calls: Path) -> None:
    assert image.ensure_image("4.3.1", lambda _: None) == "faultline/kafka:4.3.1"
    inspect, imported = _argv(docker_calls)
    assert inspect == ["image", "inspect", "--", "faultline/kafka:4.3.1"]
    assert imported[0] == "import" and imported[-3:] == ["--", "-", "faultline/kafka:4.3.1"]


@pytest.mark.parametrize(("key", "built"), [("an-older-key", True), (image.KEY, False)])
def test_an_image_of_another_root_filesystem_is_built_anew_with_its_key_and_libfaketime(
        docker_calls: Path, rootfs: Path, monkeypatch: pytest.MonkeyPatch, key: str, built: bool) -> None:
    monkeypatch.setattr(image, "exists", lambda name: True)
    monkeypatch.setattr(image, "labels", lambda name: {image.KEY_LABEL: key})
    image.ensure_image("4.3.1", lambda _: None)
    imports = [argv for argv in _argv(docker_calls) if argv[0] == "import"] if docker_calls.exists() else []
    assert bool(imports) == built
    if built:
        assert f"LABEL {image.KEY_LABEL}={image.KEY}" in imports[0]
        assert f"LABEL {image.FAKETIME_LABEL}=/{rootfs.relative_to(rootfs.parents[4])}" in imports[0]
