"""Toxic attributes drawn from a step's pick: reproducible, and valid for Toxiproxy."""

from __future__ import annotations

import pytest

from faultline.cluster.toxiproxy import STREAMS, TOXIPROXY_KINDS
from faultline.errors import NemesisError
from faultline.faults import TOXIC_KINDS
from faultline.nemeses.toxics import toxic_for


@pytest.mark.parametrize("kind", TOXIC_KINDS)
def test_toxics_are_reproducible_and_known_to_toxiproxy(kind: str) -> None:
    assert kind in TOXIPROXY_KINDS
    for pick in range(50):
        streams, attributes = toxic_for(kind, pick)
        assert (streams, attributes) == toxic_for(kind, pick)
        assert streams and set(streams) <= set(STREAMS)
        assert all(isinstance(v, int) and v >= 0 for v in attributes.values())


def test_toxic_shapes() -> None:
    streams, a = toxic_for("latency", 1)
    assert streams == ("downstream",) and a["jitter"] == a["latency"] // 2
    assert toxic_for("timeout", 9) == (("upstream", "downstream"), {"timeout": 0})
    assert set(toxic_for("slicer", 3)[1]) == {"average_size", "size_variation", "delay"}
    assert set(toxic_for("bandwidth", 3)[1]) == {"rate"}
    assert len({toxic_for("latency", p)[1]["latency"] for p in range(100)}) > 1
    with pytest.raises(NemesisError, match="unknown toxic"):
        toxic_for("limit_data", 0)
