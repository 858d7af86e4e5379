"""numba's ``njit`` as the project uses it: compiled once and cached on disk (next to
the module, in ``__pycache__``), typed for mypy (a compiled function keeps its Python
signature). ``inline`` inlines it into the compiled functions that call it.
``refcounted=False`` compiles it without numba's runtime: it makes no array, dict or
list, and the arrays it is given or inlines are not reference-counted (an atomic
increment and decrement each time one is passed on or bound), for the readers whose
inner loops pass their buffers on at every field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from numba import njit

F = TypeVar("F", bound=Callable[..., Any])


def compiled(inline: bool = False, refcounted: bool = True) -> Callable[[F], F]:
    """The decorator: ``@compiled()``, ``@compiled(inline=True)``, ``@compiled(refcounted=False)``."""
    def wrap(f: F) -> F:
        return cast(F, njit(cache=True, inline="always" if inline else "never", _nrt=refcounted)(f))
    return wrap
