"""A broker-state file's lines held to their JSON Schemas (``faultline/schemas/``).

:class:`Schema` reads one schema and says what is wrong with a value, or None. It knows
only the keywords those schemas use (one that uses another is refused when loaded, so
no schema says more than is checked), and it is stricter than JSON Schema where the
checker needs it: an integer is a JSON integer that fits 64 bits, signed (not ``1.0``,
not ``2**64``), as every integer the checker reads (docs/history.md).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import orjson

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"

_INT64 = (-(1 << 63), (1 << 63) - 1)
_ANNOTATIONS = frozenset(("$schema", "$id", "title", "description", "$defs"))
_KEYWORDS = frozenset(("type", "required", "properties", "additionalProperties", "propertyNames",
                       "items", "prefixItems", "minItems", "maxItems", "minimum", "maximum",
                       "pattern", "enum", "minLength", "$ref"))
_NAMES = {"object": "an object", "array": "an array", "string": "a string",
          "integer": "an integer", "boolean": "a boolean", "null": "null"}


def _is(kind: str, x: Any) -> bool:
    if kind == "integer":
        return x.__class__ is int and _INT64[0] <= x <= _INT64[1]
    return x.__class__ is {"object": dict, "array": list, "string": str, "boolean": bool,
                           "null": type(None)}[kind]


class Schema:
    """One schema of ``faultline/schemas/``; :meth:`problem` checks a value against it.
    ``unread`` names top-level keys the schema requires that the reader never reads: they
    may be absent (if present, they must conform)."""

    def __init__(self, name: str, unread: tuple[str, ...] = ()) -> None:
        self.name = name
        self.root: dict[str, Any] = orjson.loads((SCHEMAS / name).read_bytes())
        _known(self.root, name)
        self.root["required"] = [k for k in self.root.get("required", ()) if k not in unread]

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` (the first thing found, naming its field), or None."""
        return self._check(self.root, value, "")

    def _check(self, s: dict[str, Any], x: Any, at: str) -> str | None:
        if "$ref" in s:
            s = self._resolve(s)
        where = at or "the line"
        kinds = s.get("type")
        if kinds is not None:
            kinds = [kinds] if isinstance(kinds, str) else kinds
            if not any(_is(k, x) for k in kinds):
                return f"{where}: expected {' or '.join(_NAMES[k] for k in kinds)}, got {_short(x)}"
        if "enum" in s and not any(x.__class__ is e.__class__ and x == e for e in s["enum"]):
            return f"{where}: expected one of {s['enum']}, got {_short(x)}"
        if x.__class__ is int:
            if "minimum" in s and x < s["minimum"]:
                return f"{where}: {x} is below {s['minimum']}"
            if "maximum" in s and x > s["maximum"]:
                return f"{where}: {x} is above {s['maximum']}"
        elif isinstance(x, str):
            if "pattern" in s and not re.search(s["pattern"], x):
                return f"{where}: {_short(x)} does not match {s['pattern']}"
            if len(x) < s.get("minLength", 0):
                return f"{where}: shorter than {s['minLength']}"
        elif isinstance(x, dict):
            return self._object(s, x, at)
        elif isinstance(x, list):
            return self._array(s, x, at)
        return None

    def _object(self, s: dict[str, Any], x: dict[str, Any], at: str) -> str | None:
        for key in s.get("required", ()):
            if key not in x:
                return f"{at or 'the line'}: no {key}"
        props, extra, names = s.get("properties", {}), s.get("additionalProperties"), s.get("propertyNames")
        for key, v in x.items():
            field = f"{at}.{key}" if at else key
            if names is not None and (why := self._check(names, key, f"the key {field}")):
                return why
            sub = props.get(key, extra)
            if sub is False:
                return f"{field}: not allowed"
            if isinstance(sub, dict) and (why := self._check(sub, v, field)):
                return why
        return None

    def _array(self, s: dict[str, Any], x: list[Any], at: str) -> str | None:
        if len(x) < s.get("minItems", 0) or len(x) > s.get("maxItems", len(x)):
            return f"{at}: {len(x)} items, expected {s.get('minItems', 0)} to {s.get('maxItems', 'any')}"
        prefix = s.get("prefixItems", [])
        for i, v in enumerate(x):
            sub = prefix[i] if i < len(prefix) else s.get("items")
            if isinstance(sub, dict) and (why := self._check(sub, v, f"{at}[{i}]")):
                return why
        return None

    def _resolve(self, s: dict[str, Any]) -> dict[str, Any]:
        ref = s["$ref"]
        target: dict[str, Any] = self.root
        for part in ref.removeprefix("#/").split("/"):
            target = target[part]
        return {**target, **{k: v for k, v in s.items() if k != "$ref"}}


def _known(s: Any, name: str) -> None:
    """Refuse a schema that uses a keyword :class:`Schema` does not check (a bug here)."""
    if not isinstance(s, dict):
        return
    unknown = set(s) - _KEYWORDS - _ANNOTATIONS
    if unknown:
        raise ValueError(f"{name}: keywords not checked: {', '.join(sorted(unknown))}")
    if "$ref" in s and not s["$ref"].startswith("#/"):
        raise ValueError(f"{name}: only local references are checked: {s['$ref']}")
    for key in ("properties", "$defs"):
        for sub in s.get(key, {}).values():
            _known(sub, name)
    for key in ("additionalProperties", "propertyNames", "items"):
        _known(s.get(key), name)
    for sub in s.get("prefixItems", ()):
        _known(sub, name)


def _short(x: Any) -> str:
    """``x`` for a message: its JSON, cut to 60 characters."""
    try:
        text = orjson.dumps(x).decode()
    except TypeError:  # an integer past 64 bits, say
        text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


@cache
def schema(name: str, unread: tuple[str, ...] = ()) -> Schema:
    """The :class:`Schema` of ``faultline/schemas/<name>`` (``unread`` as it says), loaded once."""
    return Schema(name, unread)
