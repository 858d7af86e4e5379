"""docs/history.md's pairing rules compiled (:func:`faultline.history.pairing.pair`, the
one definition), for the queue checker's feed, which applies them to each op as it
reads it (:mod:`faultline.checkers.kernel`), and their state in numba's dicts."""

from __future__ import annotations

from typing import Any

from numba import types
from numba.typed import Dict

from faultline.compiled import compiled
from faultline.history import pairing

pair = compiled()(pairing.pair)

_PAIR = types.UniTuple(types.int64, 2)


@compiled()
def pairing_state() -> tuple[Any, Any, Any]:
    """Empty open sends, open other ops and retired processes, for :func:`pair` (made
    compiled: numba's dicts made in Python compile their methods in each process)."""
    return (Dict.empty(_PAIR, types.int64),
            Dict.empty(types.int64, types.int64), Dict.empty(types.int64, types.boolean))


@compiled()
def open_f(open_other: Any, p: int) -> int:
    """The f code of process ``p``'s open op (0 if none), for
    :func:`~faultline.history.pairing.pairing_message`."""
    return int(open_other[p]) if p in open_other else 0
