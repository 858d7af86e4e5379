"""``group.json`` (docs/history.md) read for the group checker: the run's group's committed
offsets of the test topic after the drain, as its coordinator answered, or why they are
not known, in one line. Never raises for bad input."""

from __future__ import annotations

from pathlib import Path

import orjson

from faultline.checkers.conform import schema
from faultline.rundir import GROUP_FILE, special


def end_offsets(run_dir: Path, group: str, topic: str) -> dict[int, int] | str:
    """``topic``'s partition -> ``group``'s committed offset, from ``run_dir/group.json``;
    or why there is none to judge by: the file is missing (the run did not collect it),
    unreadable, not as its schema says, of another group, or says the coordinator gave no
    answer."""
    path = Path(run_dir) / GROUP_FILE
    if not path.exists():
        return f"no {GROUP_FILE}: the run did not collect the group's committed offsets"
    if special(path):
        return f"{path} could not be read: not a regular file"
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        return f"{path} could not be read: {e}"
    why = schema("group.schema.json").problem(data)
    if why is not None:
        return f"{path}: {why}"
    if data["group"] != group:
        return f"{path} is of group {data['group']!r}, not the run's {group!r}"
    if data["offsets"] is None:
        return f"{path}: no committed offsets ({'; '.join(data['errors']) or 'no reason given'})"
    return {o["partition"]: o["offset"] for o in data["offsets"] if o["topic"] == topic}
