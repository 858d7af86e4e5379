"""Loss rate and bandwidth of degraded links as spec fields and sweep axes: the schedule
degrades links only the way set, every fault uses the value set, ``test.json`` records
it and the comparison's config columns carry it."""

from __future__ import annotations

import pytest

from faultline.analysis.tables import CONFIG_COLUMNS, config_columns
from faultline.errors import SpecError
from faultline.nemeses.links import LOSSES, RATES_KBIT, degradation
from faultline.nemeses.schedule import build_schedule
from faultline.spec import NemesisSpec, TestSpec
from faultline.sweep.matrix import parse_matrix


def test_a_set_loss_or_rate_replaces_the_drawn_one() -> None:
    loss, rate = NemesisSpec(link_loss_percent=20.0), NemesisSpec(link_rate_kbit=64)
    assert {degradation("loss", p, loss)["loss"] for p in range(20)} == {0.2}
    assert {degradation("bandwidth", p, rate)["rate_kbit"] for p in range(20)} == {64}
    assert {degradation("bandwidth", p, loss)["rate_kbit"] for p in range(60)} == set(RATES_KBIT)
    assert {degradation("loss", p, rate)["loss"] for p in range(60)} == set(LOSSES)


@pytest.mark.parametrize(("nemesis", "kinds"), [
    (NemesisSpec(faults=("links",)), {"loss", "bandwidth"}),
    (NemesisSpec(faults=("links",), link_loss_percent=5.0), {"loss"}),
    (NemesisSpec(faults=("links",), link_rate_kbit=256), {"bandwidth"}),
    (NemesisSpec(faults=("links",), link_loss_percent=5.0, link_rate_kbit=256), {"loss", "bandwidth"}),
])
def test_the_schedule_degrades_links_only_the_way_set(nemesis: NemesisSpec, kinds: set[str]) -> None:
    assert {s.kind for s in build_schedule(nemesis, 1, 600, 3)} == kinds


def test_they_are_sweep_axes_recorded_in_test_json_and_the_config_columns() -> None:
    matrix = parse_matrix({"defaults": {"nemesis": {"faults": ["links"]}},
                           "axes": {"link_loss_percent": [10, 50], "link_rate_kbit": [128]}},
                          "m.yaml", "m")
    assert [c.id for c in matrix.cells] == ["link_loss_percent=10,link_rate_kbit=128",
                                            "link_loss_percent=50,link_rate_kbit=128"]
    spec = matrix.cells[1].spec
    assert spec.to_json()["nemesis"]["link_loss_percent"] == 50
    assert {"nemesis_link_loss_percent", "nemesis_link_rate_kbit"} <= set(CONFIG_COLUMNS)
    assert config_columns(spec)["nemesis_link_rate_kbit"] == 128


@pytest.mark.parametrize(("nemesis", "message"), [
    ({"link_loss_percent": 0}, "link_loss_percent must be above 0 and at most 100"),
    ({"link_loss_percent": 101}, "link_loss_percent must be above 0 and at most 100"),
    ({"link_rate_kbit": 0}, "link_rate_kbit must be positive"),
])
def test_out_of_range_values_are_one_line(nemesis: dict[str, float], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        TestSpec.from_mapping({"nemesis": nemesis})
