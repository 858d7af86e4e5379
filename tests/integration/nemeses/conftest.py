"""Nemesis integration tests run on the local backend (tests/integration/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _local_backend(local_backend: None) -> None:
    """Every test here starts or uses a local cluster."""
