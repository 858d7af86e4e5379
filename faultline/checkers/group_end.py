"""``group.json`` (docs/history.md) read for the group checker: the run's group's committed
offsets of the test topic after the drain, as its coordinator answered, or why they are
not known, in one line; and the replicas of the ``__consumer_offsets`` partition that holds
them. Never raises for bad input."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from faultline.checkers.conform import schema
from faultline.rundir import GROUP_FILE, special


@dataclass(frozen=True, slots=True)
class GroupEnd:
    """What ``group.json`` says: ``offsets``, the test topic's partition -> the group's
    committed offset, or why they are not known; ``offsets_partition`` and
    ``offsets_replicas``, the ``__consumer_offsets`` partition holding them and its
    replicas' summaries (``replicas.jsonl`` lines), None where not known."""

    offsets: dict[int, int] | str
    offsets_partition: int | None = None
    offsets_replicas: list[dict[str, Any]] | None = None


def group_end(run_dir: Path, group: str, topic: str) -> GroupEnd:
    """``run_dir/group.json`` read for ``group`` and ``topic``. Its offsets are not known
    where the file is missing (the run did not collect it), unreadable, not as its schema
    says or of another group (then neither is the rest), or where it says the coordinator
    gave no answer."""
    path = Path(run_dir) / GROUP_FILE
    if not path.exists():
        return GroupEnd(f"no {GROUP_FILE}: the run did not collect the group's committed offsets")
    if special(path):
        return GroupEnd(f"{path} could not be read: not a regular file")
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        return GroupEnd(f"{path} could not be read: {e}")
    why = schema("group.schema.json").problem(data)
    if why is not None:
        return GroupEnd(f"{path}: {why}")
    if data["group"] != group:
        return GroupEnd(f"{path} is of group {data['group']!r}, not the run's {group!r}")
    offsets: dict[int, int] | str = (
        f"{path}: no committed offsets ({'; '.join(data['errors']) or 'no reason given'})"
        if data["offsets"] is None else
        {o["partition"]: o["offset"] for o in data["offsets"] if o["topic"] == topic})
    return GroupEnd(offsets, data["offsets_topic_partition"], data["offsets_replicas"])
