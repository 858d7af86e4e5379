"""Backends' clean-ups: registered when a backend loads, called by every run's destroy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from faultline.cluster.host import cleanups, runstate


def test_destroying_a_run_calls_every_registered_clean_up_with_its_id(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAULTLINE_STATE", str(tmp_path))
    called: list[str] = []
    monkeypatch.setattr(cleanups, "_REGISTERED", [])
    cleanups.register(called.append)
    cleanups.register(called.append)  # once is enough
    runstate.destroy("abc123", None)
    assert called == ["abc123"]


@pytest.mark.parametrize("entry", [
    "faultline.cluster.backends",  # the runner's cluster_for
    "faultline.commands.cluster",  # faultline cluster up --no-session and down
    "faultline.run.session",  # a session's child, which starts its cluster
])
def test_what_cleans_up_stale_runs_has_every_backends_clean_up(entry: str) -> None:
    """A fresh interpreter: in this one, a test may have loaded the docker backend already."""
    code = (f"import {entry}\nfrom faultline.cluster.host import cleanups\n"
            "print([f'{f.__module__}.{f.__qualname__}' for f in cleanups.registered()])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "['faultline.cluster.docker.cluster.remove_containers']"
