"""The history's common lines read straight into the compiled feed's op table (numba).

:func:`scan` reads the lines a run writes most (sends, polls, a drain's records) from
a block of whole lines into the rows of :mod:`.kernel`'s op table, where each is exactly
in the form the run's journal writes (docs/history.md's field order, no spaces, the
test's topic, plain integers of up to 18 digits), its index the next one and its time
no earlier than the last nor later than the test allows, a failed or unknown send's
error one the engine has seen before. Any other line (the nemesis's, another error's, a
foreign value, anything unusual or wrong) it hands back whole,
for :mod:`faultline.history`'s reader and the engine's encoder to read as they read
every line: so what a line means is decided once, there, and this module only
recognises lines that need no decision. Its pieces (:func:`head`, :func:`value_object`,
:func:`poll_records`) also read the common lines into the Spark pipeline's ``ops``
table (:mod:`faultline.analysis.rows`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from faultline.checkers import kernel
from faultline.compiled import compiled
from faultline.history import F_DRAIN, F_POLL, F_SEND, T_INVOKE, T_OK

# what scan returns first
BLOCK_DONE, BATCH_FULL, OTHER_LINE = 0, 1, 2

_NL, _QUOTE, _COMMA, _COLON, _LBRACE, _RBRACE, _LBRACKET, _RBRACKET, _MINUS, _BACKSLASH = (
    10, 34, 44, 58, 123, 125, 91, 93, 45, 92)

#: the most digits a number may have here (more: the line is read by the general reader)
_DIGITS = 18


def literal(text: str) -> Any:
    """``text``'s bytes, as the compiled readers compare them."""
    return np.frombuffer(text.encode(), np.uint8)


_INDEX, _TIME, _PROCESS, _TYPE, _F, _VALUE = (
    literal('{"index":'), literal(',"time":'), literal(',"process":'), literal(',"type":"'),
    literal('","f":"'), literal('","value":'))
_TYPES = (literal("invoke"), literal("ok"), literal("fail"), literal("info"))  # kernel.T_* order
_FS = (literal("send"), literal("poll"), literal("drain"))  # F_SEND, F_POLL, F_DRAIN
# the keys of a send's and a drain's value objects
(K_TOPIC, K_PARTITION, K_VALUE, K_OFFSET, K_RECORDS, K_LSO, K_HW, K_LAST) = range(8)
_KEYS = (literal('"topic"'), literal('"partition"'), literal('"value"'), literal('"offset"'),
         literal('"records"'), literal('"log_start_offset"'), literal('"high_watermark"'), literal('"last"'))
_NULL, _TRUE, _FALSE, _RECORDS = literal("null"), literal("true"), literal("false"), literal('{"records":[')
_ERROR = literal(',"error":"')


@compiled(inline=True, refcounted=False)
def at(buf: Any, i: int, lit: Any) -> int:
    """The index after ``lit`` if ``buf`` holds it at ``i``, else -1."""
    n = len(lit)
    if i < 0 or i + n > len(buf):
        return -1
    for k in range(n):
        if buf[i + k] != lit[k]:
            return -1
    return i + n


@compiled(inline=True, refcounted=False)
def _one_of(buf: Any, i: int, words: Any) -> tuple[int, int]:
    """Which of ``words`` ``buf`` holds at ``i`` (its index, -1 if none) and the index
    after it (-1 if none)."""
    for code in range(len(words)):
        j = at(buf, i, words[code])
        if j >= 0:
            return code, j
    return -1, -1


@compiled(refcounted=False)
def _int(buf: Any, i: int) -> tuple[int, int]:
    """An integer at ``i`` (1 to 18 digits, maybe a minus) and the index after it; -1
    for the index if there is none."""
    end = len(buf)
    if i < 0 or i >= end:
        return 0, -1
    neg = buf[i] == _MINUS
    if neg:
        i += 1
    start = i
    v = 0
    while i < end and 48 <= buf[i] <= 57:
        v = v * 10 + (buf[i] - 48)
        i += 1
    digits = i - start
    if digits == 0 or digits > _DIGITS or (digits > 1 and buf[start] == 48):
        return 0, -1
    return (-v if neg else v), i


@compiled(refcounted=False)
def _topic(buf: Any, i: int, topic: Any) -> int:
    """The index after the quoted test topic at ``i``, else -1."""
    if i < 0 or i >= len(buf) or buf[i] != _QUOTE:
        return -1
    j = at(buf, i + 1, topic)
    if j < 0 or j >= len(buf) or buf[j] != _QUOTE:
        return -1
    return j + 1


@compiled(refcounted=False)
def value_object(buf: Any, i: int, topic: Any, parts: int, got: Any, recs: Any, nr: int,
                 tp_of_records: int) -> tuple[int, int]:
    """A send's or a drain's value object at ``i``: each key at most once, into ``got``
    (the value, or for ``records``, the records' end in ``R``; -1 the index on anything
    else). A drain's records ([offset, value] each) go to ``R`` from ``nr`` (their
    partition is set once the object is read). Returns (index after it, records' end)."""
    if i < 0 or i >= len(buf) or buf[i] != _LBRACE:
        return -1, nr
    i += 1
    seen = 0  # a bit a key
    first = True
    while True:
        if i >= len(buf):
            return -1, nr
        if buf[i] == _RBRACE:
            return (i + 1 if not first else -1), nr
        if not first:
            if buf[i] != _COMMA:
                return -1, nr
            i += 1
        first = False
        key = -1
        for k in range(8):
            j = at(buf, i, _KEYS[k])
            if j >= 0 and j < len(buf) and buf[j] == _COLON:
                key = k
                i = j + 1
                break
        if key < 0 or seen >> key & 1:
            return -1, nr
        seen |= 1 << key
        if key == K_TOPIC:
            i = _topic(buf, i, topic)
            got[key] = 0
        elif key == K_LAST:
            j = at(buf, i, _TRUE)
            got[key] = 1
            if j < 0:
                j = at(buf, i, _FALSE)
                got[key] = 0
            i = j
        elif key == K_RECORDS:
            if buf[i] != _LBRACKET:
                return -1, nr
            i += 1
            while i >= 0 and i < len(buf) and buf[i] != _RBRACKET:
                if nr > recs.shape[0] - 1:
                    return -2, nr  # no room
                if buf[i] == _COMMA and nr > 0:
                    i += 1
                if i >= len(buf) or buf[i] != _LBRACKET:
                    return -1, nr
                off, i = _int(buf, i + 1)
                if i < 0 or buf[i] != _COMMA:
                    return -1, nr
                val, i = _int(buf, i + 1)
                if i < 0 or buf[i] != _RBRACKET:
                    return -1, nr
                i += 1
                recs[nr, 0] = tp_of_records
                recs[nr, 1] = off
                recs[nr, 2] = val
                nr += 1
            if i < 0 or i >= len(buf):
                return -1, nr
            i += 1
            got[key] = nr
        else:
            v, i = _int(buf, i)
            got[key] = v
            if key == K_PARTITION and not 0 <= v < parts:
                return -1, nr
        if i < 0:
            return -1, nr


@compiled(inline=True, refcounted=False)
def head(buf: Any, pos: int, index: int, last_time: int,
         max_time: int) -> tuple[int, int, int, int, int]:
    """The fields of the common line at ``pos`` before its value: (the index after
    ``"value":``, time, process, type, f), the index -1 unless the line's index is
    ``index``, its time from ``last_time`` to ``max_time`` and its f send, poll or drain."""
    i = at(buf, pos, _INDEX)
    ix, i = _int(buf, i)
    if i < 0 or ix != index:
        return -1, 0, 0, -1, -1
    i = at(buf, i, _TIME)
    t, i = _int(buf, i)
    if i < 0 or not last_time <= t <= max_time:
        return -1, 0, 0, -1, -1
    i = at(buf, i, _PROCESS)
    p, i = _int(buf, i)
    ty, i = _one_of(buf, at(buf, i, _TYPE), _TYPES)
    f, i = _one_of(buf, at(buf, i, _F), _FS)
    return at(buf, i, _VALUE), t, p, ty, f


@compiled(inline=True, refcounted=False)
def error_text(buf: Any, i: int) -> tuple[int, int]:
    """An op's ``,"error":"TEXT"}`` at ``i``, TEXT printable ASCII without escapes: (TEXT's
    start, its end, where the closing quote is); the start -1 for anything else."""
    i = at(buf, i, _ERROR)
    j = i
    end = len(buf)
    while 0 <= j < end and 32 <= buf[j] < 127 and buf[j] != _QUOTE and buf[j] != _BACKSLASH:
        j += 1
    if i >= 0 and j + 1 < end and buf[j] == _QUOTE and buf[j + 1] == _RBRACE:
        return i, j
    return -1, j


@compiled(inline=True, refcounted=False)
def _error_code(buf: Any, i: int, j: int, names: Any, name_ends: Any) -> int:
    """The number of the error name ``buf[i:j]`` among ``names`` (their bytes one after
    another, each ending where ``name_ends`` says), -1 if it is none of them."""
    start = 0
    for k in range(len(name_ends)):
        stop = name_ends[k]
        if stop - start == j - i:
            q = 0
            while q < j - i and buf[i + q] == names[start + q]:
                q += 1
            if q == j - i:
                return k
        start = stop
    return -1


@compiled(inline=True, refcounted=False)
def poll_records(buf: Any, i: int, topic: Any, parts: int, recs: Any, nr: int) -> tuple[int, int]:
    """A poll's value at ``i``, ``{"records":[[topic, partition, offset, value], ...]}``
    with the test topic, into ``recs`` (partition, offset, value) from row ``nr``.
    Returns (the index after it, the records' end); the index -1 for anything else, -2
    when ``recs`` has no room, and then the end ``nr``."""
    r0 = nr
    end = len(buf)
    i = at(buf, i, _RECORDS)
    while i >= 0 and i < end and buf[i] != _RBRACKET:
        if nr == recs.shape[0]:
            return -2, r0
        if nr > r0:
            i = i + 1 if buf[i] == _COMMA else -1
        if i < 0 or i >= end or buf[i] != _LBRACKET:
            return -1, r0
        i = _topic(buf, i + 1, topic)
        if i < 0 or buf[i] != _COMMA:
            return -1, r0
        tp, i = _int(buf, i + 1)
        if i < 0 or buf[i] != _COMMA or not 0 <= tp < parts:
            return -1, r0
        off, i = _int(buf, i + 1)
        if i < 0 or buf[i] != _COMMA:
            return -1, r0
        val, i = _int(buf, i + 1)
        if i < 0 or buf[i] != _RBRACKET:
            return -1, r0
        i += 1
        recs[nr, 0] = tp
        recs[nr, 1] = off
        recs[nr, 2] = val
        nr += 1
    if i >= 0 and i + 1 < end and buf[i] == _RBRACKET and buf[i + 1] == _RBRACE:
        return i + 2, nr
    return -1, r0


@compiled(refcounted=False)
def scan(buf: Any, pos: int, topic: Any, parts: int, ops: Any, n: int, recs: Any, nr: int,
         index: int, last_time: int, max_time: int, got: Any, names: Any,
         name_ends: Any) -> tuple[int, int, int, int, int, int]:
    """Read lines of ``buf`` from ``pos`` into ``O`` from row ``n`` and ``R`` from row
    ``nr``, while they are common lines (see the module's docstring). ``index`` is the
    next line's expected index, ``last_time`` the last line's time, ``max_time`` the
    latest a common line's may be; ``got`` (8 int64s) holds a value object's fields as
    it is read. A failed or unknown send's error is a common line's only when it is one
    of the error names the engine has numbered (``names``, ``name_ends``: see
    :func:`_error_code`; its number is its index there).

    Returns (what, pos, n, nr, index, last_time): BLOCK_DONE with ``pos`` at the block's
    end, BATCH_FULL with ``pos`` at the line that did not fit, or OTHER_LINE with ``pos``
    at a line to read otherwise (it may have no newline: the block's last).
    """
    end = len(buf)
    while pos < end:
        if n == ops.shape[0]:
            return BATCH_FULL, pos, n, nr, index, last_time
        i, t, p, ty, f = head(buf, pos, index, last_time, max_time)
        o = ops[n]
        r0 = nr
        if f == F_SEND and i >= 0:
            got[:] = kernel.NONE
            i, _ = value_object(buf, i, topic, parts, got, recs, nr, 0)
            if i >= 0:
                val, tp, off = got[K_VALUE], got[K_PARTITION], got[K_OFFSET]
                if (val == kernel.NONE or (ty == T_INVOKE and (
                        tp == kernel.NONE or got[K_TOPIC] == kernel.NONE))
                        or (ty != T_OK and off != kernel.NONE)
                        or got[K_RECORDS] != kernel.NONE or got[K_LSO] != kernel.NONE
                        or got[K_HW] != kernel.NONE or got[K_LAST] != kernel.NONE):
                    i = -1
                else:
                    o[:] = 0
                    o[kernel.F_VAL] = val
                    o[kernel.F_TP] = tp if ty == T_INVOKE else -1
                    o[kernel.F_OFF] = off if off != kernel.NONE else -1
                    o[kernel.F_ERR] = -1
                    if ty > T_OK and i < end and buf[i] != _RBRACE:
                        e0, e1 = error_text(buf, i)
                        code = _error_code(buf, e0, e1, names, name_ends) if e0 >= 0 else -1
                        o[kernel.F_ERR] = code
                        i = e1 + 1 if code >= 0 else -1
        elif f == F_POLL and ty == T_INVOKE and i >= 0:
            i = at(buf, i, _NULL)
            o[:] = 0
        elif f == F_POLL and ty == T_OK and i >= 0:
            i, nr = poll_records(buf, i, topic, parts, recs, nr)
            if i == -2:
                return BATCH_FULL, pos, n, nr, index, last_time
            o[:] = 0
        elif f == F_DRAIN and ty == T_OK and i >= 0:
            got[:] = kernel.NONE
            i, nr = value_object(buf, i, topic, parts, got, recs, nr, -1)
            if i == -2:
                return BATCH_FULL, pos, n, r0, index, last_time
            tp = got[K_PARTITION]
            if (i < 0 or tp == kernel.NONE or got[K_TOPIC] == kernel.NONE
                    or got[K_RECORDS] == kernel.NONE or got[K_VALUE] != kernel.NONE
                    or got[K_OFFSET] != kernel.NONE):
                i = -1
            else:
                recs[r0:nr, 0] = tp
                o[:] = 0
                o[kernel.F_TP] = tp
                o[kernel.F_LAST] = got[K_LAST] == 1
                o[kernel.F_HW] = got[K_HW]
                o[kernel.F_LSO] = got[K_LSO]
                o[kernel.F_OFF] = -1
                o[kernel.F_ERR] = -1
        else:
            i = -1
        if i >= 0 and i + 1 < end and buf[i] == _RBRACE and buf[i + 1] == _NL:
            o[kernel.F_LINE] = index + 1
            o[kernel.F_T] = t
            o[kernel.F_P] = p
            o[kernel.F_F] = f
            o[kernel.F_TY] = ty
            o[kernel.F_R0] = r0
            o[kernel.F_R1] = nr
            n += 1
            pos = i + 2
            index += 1
            last_time = t
            continue
        return OTHER_LINE, pos, n, r0, index, last_time
    return BLOCK_DONE, pos, n, nr, index, last_time


def line_end(buf: bytes, pos: int) -> int:
    """The index after the line at ``pos`` (its newline, or the block's end)."""
    i = buf.find(b"\n", pos)
    return len(buf) if i < 0 else i + 1
