"""docs/history.md's pairing rules, in plain Python: :func:`pair` judges one op against
the ops still open. The reader applies it to rows (:class:`RowPairing`); the queue
checker's feed applies the same function compiled (:mod:`faultline.checkers.pairing`),
so it is written in the subset of Python that numba compiles, over dicts of integers.

An op's f as a code (other names get codes from F_OTHER up) and its type as one
(OP_TYPE_CODES); what :func:`pair` finds wrong (P_*)."""

from __future__ import annotations

from typing import Any

from faultline.errors import HistoryError

F_NEMESIS, F_SEND, F_POLL, F_DRAIN, F_OTHER = -1, 0, 1, 2, 3
T_INVOKE, T_OK, T_FAIL, T_INFO = 0, 1, 2, 3
OP_TYPE_CODES: dict[str, int] = {"invoke": T_INVOKE, "ok": T_OK, "fail": T_FAIL, "info": T_INFO}
P_NEMESIS_TYPE, P_RETIRED, P_NOT_INT, P_TWICE, P_NO_OPEN_SEND, P_STILL_OPEN, P_NO_OPEN = range(7)
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def pair(open_sends: Any, open_other: Any, retired: Any, f: int, ty: int, p: int, sent: int,
         not_int: bool) -> int:
    """The pairing rules, for one op in history order: -1 if it keeps them, else what it
    breaks (P_*). ``open_sends`` holds the open sends, (process, value); ``open_other``
    each process's open op of another f (its code); ``retired`` the processes an
    ``info`` retired. ``sent`` is a send's value, ``not_int`` says it is no 64-bit int."""
    if f == F_NEMESIS:
        return P_NEMESIS_TYPE if ty != T_INFO else -1
    if ty == T_INVOKE and p in retired:
        return P_RETIRED
    if f == F_SEND:
        if not_int:
            return P_NOT_INT
        key = (p, sent)
        if ty == T_INVOKE:
            if key in open_sends:
                return P_TWICE
            open_sends[key] = 1
        else:
            if key not in open_sends:
                return P_NO_OPEN_SEND
            del open_sends[key]
            if ty == T_INFO:
                retired[p] = True
    elif ty == T_INVOKE:
        if p in open_other:
            return P_STILL_OPEN
        open_other[p] = f
    else:
        if p not in open_other or open_other[p] != f:
            return P_NO_OPEN
        del open_other[p]
        if ty == T_INFO:
            retired[p] = True
    return -1


def pairing_message(why: int, p: int, f: str, typ: str, sent: Any, open_f: str) -> str:
    """What :func:`pair`'s ``why`` means for an op by process ``p`` of ``f`` and type
    ``typ``, sending ``sent``; ``open_f`` names the process's open op (P_STILL_OPEN)."""
    return (
        "nemesis ops must have type info",
        f"process {p} was retired by an earlier info and may not invoke again",
        f"a send's value.value must be a 64-bit integer, not {sent!r}",
        f"process {p} invoked send of value {sent} twice",
        f"send {typ} of value {sent} by process {p} has no open invoke",
        f"process {p} invoked {f} while its {open_f} is still open",
        f"{f} {typ} by process {p} has no open invoke",
    )[why]


class RowPairing:
    """Enforces docs/history.md's pairing rules on rows (:func:`pair`)."""

    __slots__ = ("_f", "_name", "_open_other", "_open_sends", "_retired")

    def __init__(self, name: str) -> None:
        self._name = name
        self._f = {"send": F_SEND, "poll": F_POLL, "drain": F_DRAIN}
        self._open_sends: dict[tuple[int, int], int] = {}
        self._open_other: dict[int, int] = {}
        self._retired: dict[int, bool] = {}

    def check(self, lineno: int, d: dict[str, Any], p: Any, typ: str, f: str) -> None:
        """Check one row (already shape-checked) against the open ops; ``p``, ``typ``
        and ``f`` are its process, type and f."""
        sent: Any = 0
        if p.__class__ is not int:  # the nemesis
            fc, p = F_NEMESIS, 0
        else:
            if not INT64_MIN <= p <= INT64_MAX:
                raise HistoryError(self._name, lineno, f"process {p} does not fit 64 bits")
            fc = self._f.setdefault(f, len(self._f))
            if fc == F_SEND:
                v = d.get("value")
                sent = v.get("value") if v.__class__ is dict else None
        not_int = sent.__class__ is not int or not INT64_MIN <= sent <= INT64_MAX
        why = pair(self._open_sends, self._open_other, self._retired, fc, OP_TYPE_CODES[typ],
                    p, 0 if not_int else sent, fc == F_SEND and not_int)
        if why >= 0:
            names = list(self._f)
            raise HistoryError(self._name, lineno, pairing_message(
                why, p, f, typ, sent, names[self._open_other.get(p, 0)]))

