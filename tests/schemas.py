"""The project's JSON Schemas (``faultline/schemas/``), for the tests that hold what the
project writes to them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import orjson

from faultline.history import history_lines

SCHEMAS = Path(__file__).resolve().parents[1] / "faultline" / "schemas"


def validator(name: str) -> jsonschema.Draft202012Validator:
    """A validator for ``faultline/schemas/<name>``, after checking the schema itself."""
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def valid_lines(path: Path, schema: str) -> list[dict[str, Any]]:
    """Every line of the JSON-lines file ``path`` (zstd-compressed or not), each validated
    against ``schema``."""
    check = validator(schema)
    lines = [orjson.loads(raw) for raw in history_lines(path)]
    for line in lines:
        check.validate(line)
    return lines


#: A run directory's files and the schema each is held to (docs/history.md); JSON-lines files
#: are validated line by line.
RUN_FILES = {
    "test.json": "test.schema.json",
    "results.json": "results.schema.json",
    "history.jsonl": "history.schema.json",
    "history.jsonl.zst": "history.schema.json",
    "observations.jsonl": "observations.schema.json",
    "metadata.jsonl": "metadata.schema.json",
    "replicas.jsonl": "replicas.schema.json",
    "cluster.json": "cluster.schema.json",
    "group.json": "group.schema.json",
}


def validate_run_dir(run_dir: Path) -> list[str]:
    """Validate every file of :data:`RUN_FILES` that ``run_dir`` holds; returns their names.

    Raises ``jsonschema.ValidationError`` naming the file on the first line that does not
    match."""
    found = []
    for name, schema in RUN_FILES.items():
        path = run_dir / name
        if not path.exists():
            continue
        try:
            if name.endswith((".jsonl", ".jsonl.zst")):
                valid_lines(path, schema)
            else:
                validator(schema).validate(json.loads(path.read_text()))
        except jsonschema.ValidationError as e:
            e.message = f"{path}: {e.message}"
            raise
        found.append(name)
    return found
