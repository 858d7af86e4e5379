"""The project's JSON Schemas (``faultline/schemas/``), for the tests that hold what the
project writes to them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import orjson

SCHEMAS = Path(__file__).resolve().parents[1] / "faultline" / "schemas"


def validator(name: str) -> jsonschema.Draft202012Validator:
    """A validator for ``faultline/schemas/<name>``, after checking the schema itself."""
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def valid_lines(path: Path, schema: str) -> list[dict[str, Any]]:
    """Every line of the JSON-lines file ``path``, each validated against ``schema``."""
    check = validator(schema)
    lines = [orjson.loads(raw) for raw in path.read_bytes().splitlines()]
    for line in lines:
        check.validate(line)
    return lines
