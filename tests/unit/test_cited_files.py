"""Files the code cites in its docstrings and comments exist (``docs/history.md``, not a
``docs/HISTORY.md`` that never was)."""

from __future__ import annotations

import re
from pathlib import Path

import faultline

REPO = Path(faultline.__file__).parents[1]
#: A repository path as the code cites one: a top-level directory, then a file name.
_CITED = re.compile(r"(?<![\w/.-])((?:docs|examples|benchmarks|faultline|tests)/"
                    r"[\w./-]*\.(?:md|yaml|json|py))")


def test_every_file_the_code_cites_exists() -> None:
    missing = [f"{path.relative_to(REPO)}: {cited}"
               for path in sorted((REPO / "faultline").rglob("*.py"))
               for cited in _CITED.findall(path.read_text(encoding="utf-8"))
               if not (REPO / cited).exists()]
    assert not missing, missing
