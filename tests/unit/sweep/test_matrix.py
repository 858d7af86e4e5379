"""The matrix: its cells (the cross product, then the explicit cells), their ids and
specs, and one clear line for every mistake."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from faultline.cli import main
from faultline.errors import SpecError
from faultline.spec import build_spec
from faultline.sweep.matrix import MAX_ID, Cell, cell_id, load_matrix, parse_matrix
from faultline.sweep.runner import analysis_s, duration_s

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def cells(data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(c.id, dict(c.axes)) for c in parse_matrix(data, "m.yaml", "m").cells]


def test_the_cross_product_in_axis_order_then_the_explicit_cells() -> None:
    got = cells({"axes": {"acks": [1, "all"], "min_insync": [1, 2]},
                 "cells": [{"min_insync": 2, "faults": "wipe,kill", "acks": "all", "seeds": 3}]})
    assert got == [
        ("acks=1,min_insync=1", {"producer.acks": "1", "topic.min_insync_replicas": 1}),
        ("acks=1,min_insync=2", {"producer.acks": "1", "topic.min_insync_replicas": 2}),
        ("acks=all,min_insync=1", {"producer.acks": "all", "topic.min_insync_replicas": 1}),
        ("acks=all,min_insync=2", {"producer.acks": "all", "topic.min_insync_replicas": 2}),
        ("acks=all,min_insync=2,faults=wipe+kill,seed=3",
         {"producer.acks": "all", "topic.min_insync_replicas": 2,
          "nemesis.faults": ["wipe", "kill"], "seed": 3}),
    ]


def test_a_cell_is_the_defaults_with_its_values_set() -> None:
    m = parse_matrix({"name": "night", "defaults": {"time_limit_s": 45, "topic": {"partitions": 2},
                                                   "nemesis": {"faults": ["kill"]}},
                      "axes": {"topic.unclean_leader_election_enable": [False, True],
                               "version": ["4.3.1", "3.9.1"]}}, "m.yaml", "m")
    assert [c.id for c in m.cells] == [
        "unclean=false,version=4.3.1", "unclean=false,version=3.9.1",
        "unclean=true,version=4.3.1", "unclean=true,version=3.9.1"]
    last = m.cells[-1].spec
    assert (last.name, last.time_limit_s, last.topic.partitions, last.nemesis.faults) == \
        ("night", 45.0, 2, ("kill",))
    assert (last.topic.unclean_leader_election_enable, last.kafka.version) == (True, "3.9.1")
    assert m.cells[0].spec.kafka.version == "4.3.1"


def test_without_axes_or_cells_the_defaults_are_one_cell() -> None:
    assert cells({"defaults": {"seed": 4}}) == [("defaults", {})]


def test_acks_below_all_turns_idempotence_off_unless_the_matrix_sets_it() -> None:
    m = parse_matrix({"axes": {"acks": ["0", "1", "all"]}}, "m.yaml", "m")
    assert [c.spec.producer.enable_idempotence for c in m.cells] == [False, False, True]
    m = parse_matrix({"defaults": {"producer": {"enable_idempotence": False}},
                      "axes": {"acks": ["all"]}}, "m.yaml", "m")
    assert m.cells[0].spec.producer.enable_idempotence is False
    with pytest.raises(SpecError,
                       match=r"^m\.yaml: cell acks=1,idempotence=true: idempotence needs acks=all"):
        parse_matrix({"axes": {"acks": ["1"], "idempotence": [True]}}, "m.yaml", "m")


def test_a_cell_gets_the_spec_the_command_line_gives_for_the_same_settings() -> None:
    """Issue 34: one rule for the producer's defaults in run, specs and sweeps."""
    m = parse_matrix({"axes": {"acks": ["0", "1", "all"], "producer.retries": [0, 5],
                               "producer.max_in_flight": [1, 6]}}, "m.yaml", "queue")
    for cell in m.cells:
        p = cell.spec.producer
        assert cell.spec == build_spec(None, {"producer": {
            "acks": p.acks, "retries": p.retries, "max_in_flight": p.max_in_flight}}), cell.id
    assert [c.id for c in m.cells if c.spec.producer.enable_idempotence] == \
        ["acks=all,producer.retries=5,producer.max_in_flight=1"]


def test_ids_are_directory_names() -> None:
    assert cell_id({"kafka.version": "4.3.1/../x y", "nemesis.faults": []}) == \
        "version=4.3.1_.._x_y,faults=none"
    assert cell_id({"nemesis.interval_s": 10.0, "nemesis.max_concurrent": 2}) == \
        "interval=10,nemesis.max_concurrent=2"


def test_a_long_id_is_cut_to_a_name_a_file_system_takes_and_stays_unique() -> None:
    """Found making the KAFKA-17754 cells: a schedule of 14 steps made a 900-character id,
    which no file system takes as a directory name."""
    steps = [f"delay ends at node 1 by {ms} ms" for ms in range(1000, 1014)]
    ids = {cell_id({"nemesis.schedule": [*steps, last]}) for last in ("undelay", "heal")}
    assert len(ids) == 2
    for i in ids:
        assert len(i) == MAX_ID
        assert re.fullmatch(r"nemesis\.schedule=delay_ends_at_node_1_by_1000_ms\+[a-z0-9_+]+-[0-9a-f]{12}", i)


@pytest.mark.parametrize(("data", "message"), [
    ({"axes": {"acks": ["1"]}, "cels": []},
     "m.yaml: unknown key(s) cels; known: name, defaults, axes, cells"),
    ({"axes": {"producer.ack": ["1"]}}, "m.yaml: axes: unknown spec field 'producer.ack'; use a short name"),
    ({"axes": {"topic": [1]}}, "m.yaml: axes: unknown spec field 'topic'"),
    ({"axes": {"name": ["x"]}}, "m.yaml: axes: unknown spec field 'name'"),
    ({"axes": {"acks": []}}, "m.yaml: axes: acks: expected a non-empty list of values, got []"),
    ({"axes": {"acks": "all"}}, "m.yaml: axes: acks: expected a non-empty list of values, got 'all'"),
    ({"axes": {"acks": ["1"], "producer.acks": ["all"]}},
     "m.yaml: axes: producer.acks names producer.acks a second time"),
    ({"axes": {"acks": [2]}}, "m.yaml: cell acks=2: defaults.producer.acks: 2 is not one of 0, 1, all"),
    ({"axes": {"min_insync": [1, 4]}},
     "m.yaml: cell min_insync=4: --min-insync must be between 1 and the replication factor 3, not 4"),
    ({"axes": {"faults": [["kill", "flood"]]}}, "m.yaml: cell faults=kill+flood: unknown fault(s) flood"),
    ({"defaults": {"topic": {"partitons": 3}}},
     "m.yaml: cell defaults: defaults.topic: unknown key(s) partitons; known: min_insync_replicas, name"),
    ({"defaults": [1]}, "m.yaml: defaults: expected a mapping of spec fields, got [1]"),
    ({"cells": [{"acks": "all"}, {"acks": "all"}]}, "m.yaml: cell acks=all is listed twice"),
    # found by review: the same cell with its fields in another order ran twice, in two directories
    ({"cells": [{"seeds": 1, "acks": "1"}, {"acks": 1, "seeds": 1}]},
     "m.yaml: cell acks=1,seed=1 is listed twice"),
    ({"cells": ["acks=all"]}, "m.yaml: cells[1]: expected a mapping of axis values, got 'acks=all'"),
    ({"axes": {"kafka.broker_config": [{"a": "b"}]}},
     "m.yaml: axes: unknown spec field 'kafka.broker_config'"),
    ({"axes": {"faults": [{"kill": 1}]}}, "m.yaml: nemesis.faults: an axis value is a scalar or a list"),
    ({"name": "a b"}, "m.yaml: name 'a b' may hold only letters, digits"),
    # found by review: a sweep named .. went to results/sweeps/.., results/ itself
    ({"name": ".."}, "m.yaml: name '..' may hold only letters, digits, '.', '_' and '-' (not only dots"),
    ([1, 2], "m.yaml: expected a mapping with name, defaults, axes, cells"),
])
def test_every_mistake_is_one_line_naming_the_file(data: Any, message: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_matrix(data, "m.yaml", "m")
    assert str(e.value).startswith(message), str(e.value)
    assert "\n" not in str(e.value)


def test_the_name_is_the_files_stem_unless_given(tmp_path: Path) -> None:
    f = tmp_path / "nightly-small.yaml"
    f.write_text("axes:\n  acks: [all]\n")
    assert load_matrix(f).name == "nightly-small"
    f.write_text("name: other\naxes:\n  acks: [all]\n")
    assert load_matrix(f).name == "other"


@pytest.mark.parametrize(("text", "message"), [
    ("axes:\n  acks: [all]\n  acks: ['1']\n", "not valid YAML (line 3): duplicate key 'acks'"),
    ("defaults:\n  topic: {partitions: 3, partitions: 5}\naxes:\n  acks: [all]\n",
     "not valid YAML (line 2): duplicate key 'partitions'"),
])
def test_a_key_given_twice_is_refused_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    """Found by review: PyYAML keeps the last of two values, so the sweep (or the nightly,
    whose config is a matrix) would run another matrix than the one its user reads."""
    f = tmp_path / "m.yaml"
    f.write_text(text)
    with pytest.raises(SpecError) as e:
        load_matrix(f)
    assert str(e.value) == f"{f}: {message}"


@pytest.mark.parametrize(("text", "message"), [
    ("axes:\n  acks: [all\n", "not valid YAML (line 3)"),
    ("axes:\n  acks: [all]\n  seeds: [1, x]\n",
     "cell acks=all,seed=x: defaults.seed: expected an integer, got 'x'"),
    # found by review: the disk estimate of a time limit this long was float infinity,
    # and int() of it a traceback
    ("defaults:\n  time_limit_s: 1.0e+308\naxes:\n  acks: [all]\n",
     "cell acks=all: --time-limit must be positive and at most 604800 (a week), not 1e+308"),
])
def test_the_command_refuses_a_bad_matrix_in_one_line_before_any_run(
        tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "m.yaml"
    f.write_text(text)
    result = CliRunner().invoke(main, ["sweep", str(f), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"faultline: error: {f}") and message in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_the_examples_are_valid_matrices() -> None:
    def seeds_and_recipes(cells: tuple[Cell, ...]) -> tuple[int, int]:
        return sum(c.recipe is None for c in cells), sum(c.recipe is not None for c in cells)

    assert seeds_and_recipes(load_matrix(EXAMPLES / "smoke.yaml").cells) == (8, 12)
    nightly = load_matrix(EXAMPLES / "nightly.yaml")
    axes = yaml.safe_load((EXAMPLES / "nightly.yaml").read_text())["axes"]
    assert {k: len(v) for k, v in axes.items()} == {
        "acks": 3, "min_insync": 2, "unclean": 2, "faults": 5, "version": 2, "seeds": 2}
    assert seeds_and_recipes(nightly.cells) == (3 * 2 * 2 * 5 * 2 * 2, 96)
    assert {c.spec.kafka.version for c in nightly.cells} == {"4.3.1", "3.9.1"}
    assert seeds_and_recipes(load_matrix(EXAMPLES / "links.yaml").cells) == (8, 0)
    assert seeds_and_recipes(load_matrix(EXAMPLES / "clients.yaml").cells) == (7, 0)
    assert seeds_and_recipes(load_matrix(EXAMPLES / "clock.yaml").cells) == (4, 0)
    assert seeds_and_recipes(load_matrix(EXAMPLES / "groups.yaml").cells) == (6, 0)
    versions = load_matrix(EXAMPLES / "txn-versions.yaml").cells
    assert seeds_and_recipes(versions) == (18, 0)
    assert {(c.spec.kafka.version, c.spec.kafka.transaction_version) for c in versions} == {
        ("4.3.1", 1), ("4.3.1", 2), ("3.9.1", None)}
    assert all(c.spec.workload.client == "java" for c in versions)


def test_the_nightly_at_full_speed_fits_a_night_with_its_analysis_on_two_cores() -> None:
    cells = load_matrix(EXAMPLES / "nightly.yaml").cells
    assert all(c.spec.workload.rate == 0 for c in cells)
    assert duration_s(cells) + analysis_s(cells, 2) <= 10 * 3600


def test_a_kept_schedule_is_a_regression_sweep() -> None:
    """examples/unclean-regression.yaml: the hunt's compiled schedule in every cell."""
    from faultline.hunt import RECIPES, HuntConfig
    from faultline.hunt.compile import compile_schedule

    recipe = next(r for r in RECIPES if r.name == "unclean-election-stale-follower")
    cells = load_matrix(EXAMPLES / "unclean-regression.yaml").cells
    assert [c.spec.topic.unclean_leader_election_enable for c in cells] == [True, False]
    compiled = compile_schedule(recipe.model_steps(), HuntConfig("all", 1, True).model_config())
    assert all(tuple(c.spec.nemesis.schedule) == compiled for c in cells)


def test_nightly_refuses_a_date_that_is_not_zero_padded(tmp_path: Path) -> None:
    """Found in use: ``--date 2026-1-5`` passed; the nights sort by name, so that night
    sorted after 2026-01-10 and was taken for the newest."""
    f = tmp_path / "m.yaml"
    f.write_text("axes: {nope: [1]}\n")  # a bad matrix: nothing would run past the date
    result = CliRunner().invoke(main, ["nightly", str(f), "--date", "2026-1-5",
                                       "--results", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "'2026-1-5' is not a date YYYY-MM-DD" in result.output


def test_nightly_reruns_an_older_night_as_the_newest_of_its_analysis(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rerunning an older night (--date, to finish its failed cells) while later nights
    exist: its analysis, junit.xml and exit status are that night's, its trend the
    nights up to it; a later night's sweep taken for the newest would judge another night."""
    from types import SimpleNamespace

    import faultline.commands.nightly as nightly_mod
    from faultline.analysis.sweepdir import SWEEP_FILE

    results = tmp_path / "r"
    for night in ("2026-11-01", "2026-11-02", "2026-11-03"):
        (results / "nightly" / night / "sweep").mkdir(parents=True)
        (results / "nightly" / night / "sweep" / SWEEP_FILE).write_text("{}")
    analyzed: list[list[Path]] = []

    def analyze(dirs: list[Path], out: Path, *_: object, judge: Path) -> SimpleNamespace:
        analyzed.append(list(dirs))
        return SimpleNamespace(comparison=out / "comparison.html", junit=out / "junit.xml", exit_code=0)

    monkeypatch.setattr(nightly_mod, "load_matrix", lambda _: None)
    monkeypatch.setattr(nightly_mod, "run_matrix", lambda *_: SimpleNamespace(
        count=lambda _: 0, cells=[], exit_code=0))
    monkeypatch.setattr(nightly_mod, "analyze_sweeps", analyze)
    f = tmp_path / "m.yaml"
    f.write_text("axes: {acks: [1]}\n")
    result = CliRunner().invoke(main, ["nightly", str(f), "--date", "2026-11-02", "--results", str(results)])
    assert result.exit_code == 0, result.output
    assert [d.parent.name for d in analyzed[0]] == ["2026-11-01", "2026-11-02"]


def test_the_group_protocol_and_commit_axes_set_the_consumer() -> None:
    m = parse_matrix({"defaults": {"workload": {"name": "group"}, "consumer": {"mode": "subscribe"}},
                      "axes": {"group_protocol": ["classic", "consumer"], "commit": ["sync", "async"]}},
                     "m.yaml", "m")
    assert [c.id for c in m.cells] == [
        "group_protocol=classic,commit=sync", "group_protocol=classic,commit=async",
        "group_protocol=consumer,commit=sync", "group_protocol=consumer,commit=async"]
    last = m.cells[-1].spec.consumer
    assert (last.group_protocol, last.commit) == ("consumer", "async")


def test_the_client_and_transaction_version_axes_set_the_workload_and_the_cluster() -> None:
    m = parse_matrix({"defaults": {"kafka": {"version": "4.3.1"}},
                      "axes": {"client": ["librdkafka", "java"], "transaction_version": [1, 2]}},
                     "m.yaml", "m")
    assert [c.id for c in m.cells] == [
        "client=librdkafka,transaction_version=1", "client=librdkafka,transaction_version=2",
        "client=java,transaction_version=1", "client=java,transaction_version=2"]
    last = m.cells[-1].spec
    assert (last.workload.client, last.kafka.transaction_version) == ("java", 2)
