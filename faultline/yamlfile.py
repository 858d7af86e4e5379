"""YAML as the project reads it: every YAML file (a spec, a matrix) is read by
:func:`read_yaml_mapping`, which refuses what no one writes by hand (a key given twice,
a file too long, aliases that expand past a bound) with one line naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from faultline.errors import SpecError


class _UniqueKeys(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that gives a key twice (PyYAML keeps the
    last value: the user would run another config than the one they read)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # ``<<: *base``: its keys may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                again = key in seen
            except TypeError:  # unhashable: the safe loader's own error names it
                continue
            if again:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


#: The longest YAML file read (a spec or a matrix by hand is a few KB).
MAX_YAML_BYTES = 1 << 20
#: The most nodes a YAML file may stand for, an alias counting as all of what it names
#: (a spec or a matrix by hand has a few hundred): a few hundred bytes of aliases of
#: aliases can stand for billions, which whatever walks them would expand.
MAX_YAML_NODES = 100_000


def read_yaml_mapping(path: Path, expected: str) -> dict[str, Any]:
    """The YAML mapping in ``path`` (an empty file is an empty mapping); one SpecError line
    naming the file (and the line, for a YAML error or a key given twice in one mapping)
    when it is unreadable or no mapping, longer than :data:`MAX_YAML_BYTES`, or standing
    for more than :data:`MAX_YAML_NODES` nodes (counted before anything is built from it).
    Every YAML file the project reads is read here."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_YAML_BYTES + 1)
        if len(raw) > MAX_YAML_BYTES:
            raise SpecError(f"{path}: longer than {MAX_YAML_BYTES} bytes: not a spec written by hand")
        loader = _UniqueKeys(raw.decode("utf-8"))
        try:
            node = loader.get_single_node()
            if node is not None:
                _count(path, node, {})
            data = (loader.construct_document(node) if node is not None else None) or {}
        finally:
            loader.dispose()
    except OSError as e:
        raise SpecError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise SpecError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except RecursionError:
        raise SpecError(f"{path}: nested too deep: not a spec written by hand") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError(f"{path}: not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected {expected}, got {type(data).__name__}")
    return data


def _count(path: Path, node: yaml.Node, counted: dict[int, int]) -> int:
    """How many nodes ``node`` stands for, an alias (a node met again) as many as what it
    names; ``counted`` holds what is known by node id, -1 for a node being counted. A
    SpecError past :data:`MAX_YAML_NODES`, or for a node that holds an alias of itself."""
    if isinstance(node, yaml.ScalarNode):
        return 1
    known = counted.get(id(node))
    if known == -1:
        raise SpecError(f"{path}: an alias inside the node it names (line {node.start_mark.line + 1})")
    if known is not None:
        return known
    counted[id(node)] = -1
    inner = node.value if isinstance(node, yaml.SequenceNode) else [n for pair in node.value for n in pair]
    total = 1 + sum(_count(path, n, counted) for n in inner)
    if total > MAX_YAML_NODES:
        raise SpecError(f"{path}: stands for more than {MAX_YAML_NODES} YAML nodes, its aliases "
                        "expanded: not a spec written by hand")
    counted[id(node)] = total
    return total
