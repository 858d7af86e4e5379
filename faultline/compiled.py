"""numba's ``njit`` as the project uses it: compiled once and cached on disk, typed for
mypy (a compiled function keeps its Python signature). ``inline`` inlines it into the
compiled functions that call it.
The cache is the package's own (:func:`cache_dir`), one per version of its sources:
numba checks a cached function against its own file only, not against the files of the
compiled functions it calls and keeps compiled in, so an edit of a callee alone (a
``git pull`` of a checkout) would leave the caller's stale code running.
``refcounted=False`` compiles it without numba's runtime: it makes no array, dict or
list, and the arrays it is given or inlines are not reference-counted (an atomic
increment and decrement each time one is passed on or bound), for the readers whose
inner loops pass their buffers on at every field."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import numba
from numba import njit

F = TypeVar("F", bound=Callable[..., Any])


def compiled(inline: bool = False, refcounted: bool = True) -> Callable[[F], F]:
    """The decorator: ``@compiled()``, ``@compiled(inline=True)``, ``@compiled(refcounted=False)``."""
    def wrap(f: F) -> F:
        return cast(F, njit(cache=True, inline="always" if inline else "never", _nrt=refcounted)(f))
    return wrap


def cache_dir(package: Path) -> Path:
    """Where numba caches ``package``'s compiled functions: ``__pycache__/numba-<digest>``
    in it, the digest of every ``.py`` file's path and bytes under it, so that any edit
    compiles afresh."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return package / "__pycache__" / f"numba-{digest.hexdigest()[:16]}"


def _use_cache(where: Path) -> None:
    """Cache there from now on, and remove the caches of the package's other versions."""
    if not where.is_dir():
        for old in where.parent.glob("numba-*"):
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
    numba.config.CACHE_DIR = str(where)


_use_cache(cache_dir(Path(__file__).resolve().parent))
