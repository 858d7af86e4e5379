"""A sweep's matrix: the YAML a user writes, validated and expanded into cells.

::

    name: smoke                  # optional; else the file's stem
    defaults:                    # any spec field, shaped like a spec YAML (test.json)
      time_limit_s: 45
      nemesis: {faults: [kill], interval_s: 10}
    axes:                        # spec field -> the values it takes; the cross product
      acks: [1, all]
      min_insync: [1, 2]
      kafka.version: [4.3.1, 3.9.1]
    cells:                       # optional: more cells, each a mapping of axis values
      - {acks: all, min_insync: 2, faults: [wipe]}
    schedules: targeted          # optional: random (the default) or targeted

An axis names a spec field by its dotted path in ``test.json`` (``producer.acks``,
``topic.min_insync_replicas``, ``nemesis.faults``, ``seed``, ...) or by a short name
(:data:`SHORT_NAMES`). Axes are crossed in the order written (the last varies fastest),
then the explicit ``cells`` follow. A cell's spec is the defaults with its axis values
set; its ``test.json`` name is the matrix's name unless the defaults give one.

A cell that sets no ``producer.enable_idempotence`` (nor its defaults) gets Kafka's
producer's default, as every spec does (:func:`faultline.spec.idempotence_allowed`): with
``acks`` 0 or 1 it runs without idempotence (its ``test.json`` says so).

A cell's id is its axis values, ``short-or-dotted-name=value`` joined by ``,``, in the
axes' order (a list value joined by ``+``, ``none`` when empty); characters other than
letters, digits and ``._+=,-`` become ``_``, so the id is a directory name; an id longer
than :data:`MAX_ID` characters (a long schedule's) keeps its first ones and ends with
``-`` and 12 hex digits of its whole text's SHA-1, so it stays a name a file system takes
and stays unique. Every
cell is built and validated before anything runs: a mistake is one SpecError line
naming the file, the cell and the field.

``schedules: targeted`` adds, after the first cell of each config (its axes but the
seed), a cell per model recipe that config runs (:mod:`faultline.sweep.schedules`): its
id is the config's with ``,recipe=<name>``, its axes the config's (no seed), its spec
the config's with the recipe's schedule.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faultline.errors import SpecError
from faultline.spec import TestSpec, name_ok
from faultline.sweep.schedules import SCHEDULES, chosen, targeted_runs
from faultline.yamlfile import read_yaml_mapping

#: Short axis names and the spec fields they stand for.
SHORT_NAMES: dict[str, str] = {
    "acks": "producer.acks",
    "idempotence": "producer.enable_idempotence",
    "min_insync": "topic.min_insync_replicas",
    "unclean": "topic.unclean_leader_election_enable",
    "replication_factor": "topic.replication_factor",
    "faults": "nemesis.faults",
    "interval": "nemesis.interval_s",
    "version": "kafka.version",
    "seeds": "seed",
    "link_loss_percent": "nemesis.link_loss_percent",
    "link_rate_kbit": "nemesis.link_rate_kbit",
    "group_protocol": "consumer.group_protocol",
    "commit": "consumer.commit",
    "client": "workload.client",
    "transaction_version": "kafka.transaction_version",
}
#: The longest cell id, in characters: a directory name, below the 255 bytes of a file
#: system's name with room for what a run adds beside it.
MAX_ID = 200
#: The name a cell id uses for a field (the short name where there is one).
_ID_NAME: dict[str, str] = {path: short for short, path in SHORT_NAMES.items() if short != "seeds"}
_TOP_KEYS = ("name", "defaults", "axes", "cells", "schedules")
#: Fields that are not test parameters: set by the run, or naming it.
_NOT_AXES = frozenset({"name", "start_wall_ms"})
_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+=,-")


@dataclass(frozen=True, slots=True)
class Cell:
    """One run of the sweep: its id, its axis values (dotted path -> the value as
    ``test.json`` holds it) and its whole spec; for a targeted run, the model's ``recipe``
    it runs and the anomalies the model ``predicts`` for it on the cell's config."""

    id: str
    axes: Mapping[str, Any]
    spec: TestSpec
    recipe: str | None = None
    predicts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Matrix:
    """A validated matrix: its name, the data it was read from, and its cells in order."""

    name: str
    data: Mapping[str, Any]
    cells: tuple[Cell, ...]


def _fields(spec: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every leaf field of a ``test.json`` mapping, dotted path -> value."""
    out: dict[str, Any] = {}
    for key, value in spec.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(_fields(value, f"{path}."))
        else:
            out[path] = value
    return out


_AXIS_FIELDS = frozenset(p for p, v in _fields(TestSpec().to_json()).items()
                         if p not in _NOT_AXES and not isinstance(v, Mapping))


def parse_matrix(data: Any, source: str, default_name: str) -> Matrix:
    """Validate matrix ``data`` (read from ``source``) and expand its cells; raises SpecError.

    ``default_name`` is the name when ``data`` has none (the file's stem).
    """
    if not isinstance(data, Mapping):
        raise SpecError(f"{source}: expected a mapping with {', '.join(_TOP_KEYS)}")
    unknown = sorted(set(map(str, data)) - set(_TOP_KEYS))
    if unknown:
        raise SpecError(f"{source}: unknown key(s) {', '.join(unknown)}; known: {', '.join(_TOP_KEYS)}")
    name = str(data.get("name") or default_name)
    if not name_ok(name):
        raise SpecError(f"{source}: name {name!r} may hold only letters, digits, '.', '_' and '-' "
                        "(not only dots: it names the sweep's directory)")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        raise SpecError(f"{source}: defaults: expected a mapping of spec fields, got {defaults!r}")
    axes = data.get("axes") or {}
    if not isinstance(axes, Mapping):
        raise SpecError(f"{source}: axes: expected a mapping of spec field -> list of values")
    order: list[str] = []
    values: list[list[Any]] = []
    for key, vals in axes.items():
        path = _axis_path(key, f"{source}: axes")
        if path in order:
            raise SpecError(f"{source}: axes: {key} names {path} a second time")
        if not isinstance(vals, list) or not vals:
            raise SpecError(f"{source}: axes: {key}: expected a non-empty list of values, got {vals!r}")
        order.append(path)
        values.append(vals)
    points: list[dict[str, Any]] = [dict(zip(order, combo, strict=True))
                                     for combo in itertools.product(*values)] if order else []
    extra = data.get("cells") or []
    if not isinstance(extra, list):
        raise SpecError(f"{source}: cells: expected a list of mappings of axis values")
    for i, cell in enumerate(extra, 1):
        if not isinstance(cell, Mapping) or not cell:
            raise SpecError(f"{source}: cells[{i}]: expected a mapping of axis values, got {cell!r}")
        point: dict[str, Any] = {}
        for key, value in cell.items():
            path = _axis_path(key, f"{source}: cells[{i}]")
            if path in point:
                raise SpecError(f"{source}: cells[{i}]: {key} names {path} a second time")
            point[path] = value
        points.append(point)
    if not points:
        points = [{}]
    cells: list[Cell] = []
    seen: set[str] = set()
    for point in points:
        for path, value in point.items():
            if isinstance(value, Mapping):
                raise SpecError(f"{source}: {path}: an axis value is a scalar or a list, not {value!r}")
        ordered = {p: point[p] for p in order if p in point} | \
            {p: v for p, v in point.items() if p not in order}
        cell = _cell(name, defaults, ordered, source)
        same = cell_id(dict(sorted(cell.axes.items())))  # the same fields in any order
        if cell.id in seen or same in seen:
            raise SpecError(f"{source}: cell {cell.id} is listed twice")
        seen |= {cell.id, same}
        cells.append(cell)
    schedules = data.get("schedules", "random")
    if schedules not in SCHEDULES:
        raise SpecError(f"{source}: schedules: expected one of {', '.join(SCHEDULES)}, got {schedules!r}")
    if schedules == "targeted":
        cells = _with_targeted(cells, source)
    return Matrix(name, dict(data), tuple(cells))


def _with_targeted(cells: Sequence[Cell], source: str) -> list[Cell]:
    """``cells`` with, after the first cell of each config, its targeted runs (module docstring)."""
    recipes = chosen([c.spec for c in cells])
    out: list[Cell] = []
    configs: set[str] = set()
    for cell in cells:
        out.append(cell)
        axes = {p: v for p, v in cell.axes.items() if p != "seed"}
        config = cell_id(dict(sorted(axes.items())))
        if config in configs:
            continue
        configs.add(config)
        try:
            runs = targeted_runs(cell.spec, recipes)
        except SpecError as e:
            raise SpecError(f"{source}: cell {cell.id}: {e}") from None
        out += [Cell(f"{cell_id(axes)},recipe={r.recipe}", axes, r.spec, r.recipe, r.predicts) for r in runs]
    return out


def _axis_path(key: Any, where: str) -> str:
    path = SHORT_NAMES.get(str(key), str(key))
    if path not in _AXIS_FIELDS:
        raise SpecError(f"{where}: unknown spec field {key!r}; use a short name "
                        f"({', '.join(SHORT_NAMES)}) or a dotted path such as producer.acks")
    return path


def _cell(name: str, defaults: Mapping[str, Any], point: Mapping[str, Any], source: str) -> Cell:
    """The cell of one point of the matrix: the defaults with the point's values set."""
    merged = _nested_copy(defaults)
    merged.setdefault("name", name)
    for path, value in point.items():
        _set(merged, path, value)
    label = cell_id(point)
    try:
        spec = TestSpec.from_mapping(merged, source="defaults")
    except SpecError as e:
        raise SpecError(f"{source}: cell {label}: {e}") from None
    stored = _fields(spec.to_json())
    axes = {path: stored[path] for path in point}
    return Cell(cell_id(axes), axes, spec)


def cell_id(axes: Mapping[str, Any]) -> str:
    """The cell's id (see the module docstring); ``defaults`` for a cell without axes."""
    parts = [f"{_ID_NAME.get(path, path)}={_id_value(value)}" for path, value in axes.items()]
    text = "".join(c if c in _ID_CHARS else "_" for c in ",".join(parts) or "defaults")
    if len(text) <= MAX_ID:
        return text
    return f"{text[:MAX_ID - 13]}-{hashlib.sha1(text.encode()).hexdigest()[:12]}"


def _id_value(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "+".join(_id_value(v) for v in value) or "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _nested_copy(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _nested_copy(v) if isinstance(v, Mapping) else v for k, v in data.items()}


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    *sections, leaf = path.split(".")
    for section in sections:
        inner = data.get(section)
        if inner is None:
            inner = data[section] = {}
        elif not isinstance(inner, dict):
            return  # a section the file got wrong (``topic: 5``): validation names it
        data = inner
    data[leaf] = list(value) if isinstance(value, Sequence) and not isinstance(value, str) else value


def load_matrix(path: Path) -> Matrix:
    """The matrix in the YAML file ``path``; one SpecError line for anything wrong with it."""
    return parse_matrix(read_yaml_mapping(path, "a matrix (name, defaults, axes, cells)"),
                        str(path), path.stem)
