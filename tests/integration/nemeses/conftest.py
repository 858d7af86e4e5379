"""Nemesis integration tests need root: the local backend uses namespaces and iptables."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("the local backend needs root (network namespaces, iptables)")
