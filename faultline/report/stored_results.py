"""A stored ``results.json`` held to the types of ``faultline/schemas/results.schema.json``
before the page reads it, so that a value of the wrong type is one line naming it, never a
traceback from deep in the page.

Only the types are asked (``type``, through ``properties``, ``additionalProperties``,
``items`` and ``$ref``): the page reads an absent field as empty, and a results.json of an
older or newer checker may lack fields, or hold others, that the schema lists or does not.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import orjson

_WORDS = {"object": "an object", "array": "a list", "string": "a string", "integer": "an integer",
          "number": "a number", "boolean": "true or false", "null": "null"}


@functools.cache
def _schema() -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(
        resources.files("faultline").joinpath("schemas/results.schema.json").read_bytes())
    return data


def problem(stored: Any) -> str | None:
    """The first value of a results.json object ``stored`` whose type the schema does not
    allow, as ``field.path: expected ..., got ...``; None when there is none."""
    return _problem(stored, _schema(), "")


def _problem(value: Any, schema: dict[str, Any], where: str) -> str | None:
    if "$ref" in schema:  # "#/$defs/name", the only kind the schema uses
        schema = _schema()["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, k) for k in kinds):
            return f"{where}: expected {' or '.join(_WORDS[k] for k in kinds)}, got {value!r:.40}"
    if isinstance(value, dict):
        fields = schema.get("properties", {})
        others = schema.get("additionalProperties")
        for k, v in value.items():
            sub = fields.get(k, others)
            if isinstance(sub, dict) and (p := _problem(v, sub, f"{where}.{k}" if where else k)):
                return p
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            if p := _problem(v, schema["items"], f"{where}[{i}]"):
                return p
    return None


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, {"object": dict, "array": list, "string": str, "boolean": bool,
                              "null": type(None)}[kind])
