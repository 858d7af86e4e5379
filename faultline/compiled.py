"""numba's ``njit`` as the project uses it: compiled once and cached on disk (next to
the module, in ``__pycache__``), typed for mypy (a compiled function keeps its Python
signature). ``inline`` inlines it into the compiled functions that call it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from numba import njit

F = TypeVar("F", bound=Callable[..., Any])


def compiled(inline: bool = False) -> Callable[[F], F]:
    """The decorator: ``@compiled()`` or ``@compiled(inline=True)``."""
    def wrap(f: F) -> F:
        return cast(F, njit(cache=True, inline="always" if inline else "never")(f))
    return wrap
