"""The queue checker's feed, compiled (numba): the one definition of what each send,
poll and drain of a history does to the checker's columns and maps.

:class:`faultline.checkers.queue.Engine` encodes ops as rows of an int64 table (``O``,
its ``F_*`` fields; records in ``R``) and calls :func:`feed`, which applies them in
order and stops at the first op it cannot apply yet: the columns are full (the engine
grows them and calls again from that op), an offset map must grow, its events buffer
must be emptied, or the op is in error. An op is applied whole or not at all, so a
call resumes at an op's start.

What the engine's Python does not see while the feed runs comes back as events
(``E``, rows of ``EV_*``): conflicts, odd reads, a consumer's gaps and backward steps,
a drain's second copies, and the measures' buckets, latencies and unavailability
windows, in history order.

Values are int64s: a history's values, offsets, processes and times must fit 64 bits
(the encoder refuses others).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import types
from numba.typed import Dict, List

from faultline.checkers.pairing import pair
from faultline.compiled import compiled
from faultline.history import (
    F_DRAIN,
    F_POLL,
    F_SEND,
    P_NOT_INT,
    T_INVOKE,
    T_OK,
)

# the cells (see columns): EMPTY, WIDE, NARROW_MAX, NONE
EMPTY = -(1 << 31)
WIDE = EMPTY + 1
NARROW_MAX = (1 << 31) - 1
NONE = -(1 << 63)
RUN_BITS = 6
RUN_MASK = (1 << RUN_BITS) - 1
MAX_GROW = 1 << 20
OPEN, OK, FAIL, INFO = 0, 1, 2, 3

# the op table's fields
F_LINE, F_T, F_P, F_F, F_TY, F_TP, F_VAL, F_OFF, F_ERR, F_R0, F_R1, F_LAST, F_HW, F_LSO, F_BAD = range(15)
FIELDS = 15
# F_F and F_TY hold the codes of faultline.history (F_*, T_*)
# F_BAD: an error the encoder found in the op, raised when the feed reaches it: before
# the pairing rules (BAD_SHAPE), as theirs (BAD_PAIRING: a send's value that is no
# 64-bit integer) or after them (BAD_VALUE)
BAD_NONE, BAD_SHAPE, BAD_PAIRING, BAD_VALUE = 0, 1, 2, 3

# what feed returns (code, with the op it stopped at and an argument)
DONE, GROW_SLOTS, GROW_MAP, FLUSH, ERROR = 0, 1, 2, 3, 4
# FLUSH: the events are to be applied, or the latencies' buffer, the read ops' columns
# (read_t, read_by: an op reads sends first at most once) or the errors' (err_slots,
# err_codes: a send's at most) need room for one more
# GROW_MAP's argument: which map (VSLOT, or 1 + 3 * part + ACKS / POLLS / DRAINS)
VSLOT, ACKS, POLLS, DRAINS = 0, 0, 1, 2
# ERROR's argument: the encoder's error, a send's value sent before, a completion of
# no open send; or E_PAIRING + what faultline.history.pairing.pair found (P_*)
E_ENCODED, E_ALREADY_SENT, E_NO_OPEN, E_PAIRING = 0, 1, 2, 100

# events: E rows of EV_FIELDS int64s, the first the kind
EV_CONFLICT, EV_ODD, EV_GAP, EV_BACK, EV_DUP, EV_LAT, EV_BUCKET, EV_WINDOW = range(8)
EV_FIELDS = 8
#: the most events one record makes (an op's completion of a send: fewer than two records' worth)
EV_PER = 3

# the scalars (S)
(S_SLOTS, S_ROOM, S_READS, S_ERRS, S_EVENTS, S_FIRST_SEND, S_LAST_SEND, S_BUCKET, S_BUCKETED,
 S_OK, S_FAIL, S_INFO, S_LATS, S_BUCKET_NS, S_UNAVAILABLE_NS) = range(15)
SCALARS = 15


# numba's typed containers, made and used here only: their Python-side methods are
# compiled anew in every process (~2 s), these functions once (cached)


_PAIR = types.UniTuple(types.int64, 2)


@compiled()
def new_extra() -> Any:
    """An empty int64 -> int64 dict (a Narrow's :attr:`extra`, ...)."""
    return Dict.empty(types.int64, types.int64)


@compiled()
def new_pairs() -> Any:
    """An empty (int64, int64) -> int64 dict."""
    return Dict.empty(_PAIR, types.int64)


@compiled()
def extra_get(extra: Any, key: int, default: int) -> int:
    """``extra.get(key, default)``."""
    if key in extra:
        return int(extra[key])
    return default


@compiled()
def extra_pop(extra: Any, key: int) -> int:
    """``extra.pop(key)`` (the key must be there)."""
    value = extra[key]
    del extra[key]
    return int(value)


@compiled()
def extra_items(extra: Any) -> tuple[Any, Any]:
    """The keys and values of ``extra``, as two int64 arrays."""
    keys = np.empty(len(extra), np.int64)
    values = np.empty(len(extra), np.int64)
    for i, (k, v) in enumerate(extra.items()):
        keys[i] = k
        values[i] = v
    return keys, values


@compiled()
def new_list(first: Any, n: int) -> Any:
    """A list of ``n`` of ``first`` (an array, or a dict)."""
    out = List()
    for _ in range(n):
        out.append(first)
    return out


@compiled()
def list_set(items: Any, i: int, item: Any) -> None:
    """``items[i] = item``."""
    items[i] = item


@compiled(inline=True)
def narrow_get(arr: Any, extra: Any, i: int) -> int:
    """A Narrow cell's value (NONE when empty)."""
    cur = arr[i]
    if cur == EMPTY:
        return NONE
    if cur == WIDE:
        return int(extra[i])
    return int(cur)


@compiled(inline=True)
def narrow_set(arr: Any, extra: Any, i: int, value: int) -> None:
    """Store ``value`` in a Narrow cell."""
    if WIDE < value <= NARROW_MAX:
        arr[i] = value
    else:
        arr[i] = WIDE
        extra[i] = value


@compiled(inline=True)
def rising_put(arr: Any, extra: Any, bases: Any, i: int, value: int) -> None:
    """Store ``value`` in a Rising column's cell ``i``, the cell after the last one
    stored: a run's first cell sets its base."""
    if not i & RUN_MASK:
        bases[i >> RUN_BITS] = value
    narrow_set(arr, extra, i, value - bases[i >> RUN_BITS])


@compiled()
def omap_get(arr: Any, extra: Any, offset: int) -> int:
    """An offset map's value at ``offset`` (NONE when none)."""
    if 0 <= offset < len(arr):
        return narrow_get(arr, extra, offset)
    if offset in extra:
        return int(extra[offset])
    return NONE


@compiled()
def omap_put(arr: Any, extra: Any, offset: int, value: int) -> int:
    """Store ``value`` at ``offset`` unless something is there; return what was there
    (NONE if nothing). The map must have grown to hold ``offset`` in its cells if it is
    within :data:`MAX_GROW` of their end (:func:`_short`)."""
    if 0 <= offset < len(arr):
        cur = narrow_get(arr, extra, offset)
        if cur == NONE:
            narrow_set(arr, extra, offset, value)
        return cur
    if offset in extra:
        return int(extra[offset])
    extra[offset] = value
    return NONE


@compiled(inline=True)
def _short(n: int, offset: int) -> bool:
    """Whether a map of ``n`` cells must grow before ``offset`` is stored."""
    return n <= offset < n + MAX_GROW


@compiled(inline=True)
def _read_op(S: Any, read_t: Any, read_by: Any, read_by_x: Any, t: int, by: int) -> int:
    """A new read op's number (an op that reads a send first), at time ``t`` by ``by``
    (a consumer process, or -1 for the drain)."""
    k = S[S_READS]
    read_t[k] = t
    narrow_set(read_by, read_by_x, k, by)
    S[S_READS] = k + 1
    return int(k)


@compiled()
def percentiles(lat: Any, n: int) -> tuple[int, int, int, int]:
    """p50, p95, p99 and max of ``lat[:n]`` (n > 0), as measures.py defines them."""
    s = np.sort(lat[:n])
    return (s[min(n - 1, int(0.50 * n))], s[min(n - 1, int(0.95 * n))],
            s[min(n - 1, int(0.99 * n))], s[n - 1])


@compiled(inline=True)
def _event(E: Any, S: Any, kind: int, a: int, b: int, c: int, d: int, e: int, f: int,
           g: int) -> None:
    k = S[S_EVENTS]
    E[k, 0] = kind
    E[k, 1] = a
    E[k, 2] = b
    E[k, 3] = c
    E[k, 4] = d
    E[k, 5] = e
    E[k, 6] = f
    E[k, 7] = g
    S[S_EVENTS] = k + 1


@compiled()
def _completed(S: Any, E: Any, lat: Any, last_ok: Any, miss_fail: Any, miss_info: Any,
               part: int, status: int, invoked: int, t: int) -> None:
    """A send to partition ``part`` completed with ``status`` (measures.py's rules)."""
    S[S_LAST_SEND] = t
    b = t // S[S_BUCKET_NS]
    if b != S[S_BUCKET]:
        _flush_bucket(S, E, lat)
        S[S_BUCKET] = b
        S[S_BUCKETED] = 1
    S[S_OK + status - 1] += 1
    if status == OK:
        lat[S[S_LATS]] = t - invoked
        S[S_LATS] += 1
        last = last_ok[part]
        if last == NONE:
            last = S[S_FIRST_SEND] if S[S_FIRST_SEND] != NONE else invoked
        if t - last > S[S_UNAVAILABLE_NS]:
            _event(E, S, EV_WINDOW, part, last, t, miss_fail[part], miss_info[part], 0, 0)
        last_ok[part] = t
        miss_fail[part] = 0
        miss_info[part] = 0
    elif status == FAIL:
        miss_fail[part] += 1
    else:
        miss_info[part] += 1


@compiled()
def _flush_bucket(S: Any, E: Any, lat: Any) -> None:
    """The current bucket's latencies and counts as events; a bucket never comes back."""
    n = S[S_LATS]
    if n:
        p50, p95, p99, top = percentiles(lat, n)
        _event(E, S, EV_LAT, S[S_BUCKET], n, p50, p95, p99, top, 0)
        S[S_LATS] = 0
    if S[S_BUCKETED]:
        _event(E, S, EV_BUCKET, S[S_BUCKET], S[S_OK], S[S_FAIL], S[S_INFO], 0, 0, 0)
    S[S_OK] = 0
    S[S_FAIL] = 0
    S[S_INFO] = 0


@compiled()
def flush_measures(S: Any, E: Any, lat: Any) -> None:
    """The last bucket's events, at the end of the feed."""
    _flush_bucket(S, E, lat)
    S[S_BUCKETED] = 0


@compiled()
def feed(ops: Any, recs: Any, k: int, end: int, validate: bool, S: Any, E: Any,
         vslot: Any, vslot_x: Any, c_tp: Any, c_proc: Any, c_proc_x: Any, c_inv: Any,
         c_inv_x: Any, bases: Any, c_done: Any, c_status: Any, c_ack: Any, c_ack_x: Any,
         c_drain: Any, c_drain_x: Any, c_read: Any, read_t: Any, read_by: Any, read_by_x: Any,
         read_offs: Any, err_slots: Any, err_codes: Any, maps: Any, maps_x: Any, lens: Any,
         polled: Any, drained: Any, drain_end: Any, consumers: Any, counts: Any, lat: Any,
         last_ok: Any, miss_fail: Any, miss_info: Any, open_sends: Any, open_other: Any,
         retired: Any) -> tuple[int, int, int]:
    """Apply ops ``k`` to ``end`` - 1 of ``ops``; return (code, op, argument): DONE with
    ``end``, or the op it stopped before and why (see the module's docstring).

    ``lens`` holds the length of each of ``maps``; ``drain_end`` per part: complete,
    drain time, HW, log start (NONE for None), the last poll that read it; ``counts``: polls ok / fail / info,
    drains ok / fail / info.
    """
    n = S[S_SLOTS]
    room = S[S_ROOM]
    ev_room = E.shape[0]
    while k < end:
        f = ops[k, F_F]
        ty = ops[k, F_TY]
        p = ops[k, F_P]
        t = ops[k, F_T]
        bad = ops[k, F_BAD]
        r0, r1 = ops[k, F_R0], ops[k, F_R1]
        if (S[S_EVENTS] + EV_PER * (r1 - r0 + 2) > ev_room or S[S_LATS] == len(lat)
                or S[S_READS] == len(read_t) or S[S_ERRS] == len(err_slots)):
            S[S_SLOTS] = n
            return FLUSH, k, 0
        if bad == BAD_SHAPE:
            return ERROR, k, E_ENCODED
        # what must grow before the op is applied: the columns, the maps
        if f == F_SEND and ty == T_INVOKE:
            if n == room:
                S[S_SLOTS] = n
                return GROW_SLOTS, k, 0
            if bad == BAD_NONE and _short(len(vslot), ops[k, F_VAL]):
                S[S_SLOTS] = n
                return GROW_MAP, k, VSLOT
        elif f == F_SEND and ty == T_OK and bad == BAD_NONE:
            off = ops[k, F_OFF]
            if off >= 0:
                s = omap_get(vslot, vslot_x, ops[k, F_VAL])
                if s >= 0 and _short(lens[3 * c_tp[s] + ACKS], off):
                    S[S_SLOTS] = n
                    return GROW_MAP, k, 1 + 3 * c_tp[s] + ACKS
        elif f in (F_POLL, F_DRAIN) and ty == T_OK and bad == BAD_NONE:
            which = POLLS if f == F_POLL else DRAINS
            for j in range(r0, r1):
                m = 3 * recs[j, 0] + which
                if _short(lens[m], recs[j, 1]):
                    S[S_SLOTS] = n
                    return GROW_MAP, k, 1 + m
        if validate:
            why = pair(open_sends, open_other, retired, f, ty, p, ops[k, F_VAL], bad == BAD_PAIRING)
            if why == P_NOT_INT:
                return ERROR, k, E_ENCODED
            if why >= 0:
                return ERROR, k, E_PAIRING + why
        if bad != BAD_NONE:
            return ERROR, k, E_ENCODED
        if f == F_SEND:
            val = ops[k, F_VAL]
            if ty == T_INVOKE:
                if omap_put(vslot, vslot_x, val, n) != NONE:
                    return ERROR, k, E_ALREADY_SENT
                c_tp[n] = ops[k, F_TP]
                narrow_set(c_proc, c_proc_x, n, p)
                rising_put(c_inv, c_inv_x, bases, n, t)
                n += 1
                if S[S_FIRST_SEND] == NONE:
                    S[S_FIRST_SEND] = t
            else:
                s = omap_get(vslot, vslot_x, val)
                if s < 0 or c_status[s] != OPEN or narrow_get(c_proc, c_proc_x, s) != p:
                    S[S_SLOTS] = n
                    return ERROR, k, E_NO_OPEN
                tp = c_tp[s]
                c_status[s] = ty
                c_done[s] = t
                if ty == T_OK:
                    off = ops[k, F_OFF]
                    if off >= 0:
                        narrow_set(c_ack, c_ack_x, s, off)
                        if (s in read_offs and read_offs[s] == off
                                and read_by[c_read[s]] != -1):
                            del read_offs[s]  # polled before its ack, where it says
                        m = 3 * tp + ACKS
                        cur = omap_put(maps[m], maps_x[m], off, val)
                        if cur != NONE and cur != val:
                            _event(E, S, EV_CONFLICT, tp, off, cur, val, 0, t, p)
                elif ops[k, F_ERR] >= 0:
                    e = S[S_ERRS]
                    err_slots[e] = s
                    err_codes[e] = ops[k, F_ERR]
                    S[S_ERRS] = e + 1
                invoked = bases[s >> RUN_BITS] + narrow_get(c_inv, c_inv_x, s)
                _completed(S, E, lat, last_ok, miss_fail, miss_info, tp, ty, invoked, t)
        elif f == F_POLL and ty == T_OK:
            counts[0] += 1
            first_k = -1  # this poll's read op number, once it reads a send first
            tp = -1
            held, held_x = maps[0], maps_x[0]
            last = NONE
            has_last = False
            run = 0
            for j in range(r0, r1):
                rtp, off, val = recs[j, 0], recs[j, 1], recs[j, 2]
                if rtp != tp:  # records come in runs of one partition
                    if tp >= 0:
                        consumers[(p, tp)] = last
                        polled[tp] += run
                        drain_end[tp, 4] = t
                    tp = rtp
                    has_last = (p, tp) in consumers
                    last = consumers[(p, tp)] if has_last else NONE
                    run = 0
                    held, held_x = maps[3 * tp + POLLS], maps_x[3 * tp + POLLS]
                if not has_last:  # its first: from the log start (assign mode)
                    _event(E, S, EV_GAP, tp, p, NONE, 0, off, t, 0)
                elif off != last + 1:
                    _event(E, S, EV_BACK if off <= last else EV_GAP, tp, p, last, 1, off, t, 0)
                last = off
                has_last = True
                run += 1
                cur = omap_put(held, held_x, off, val)
                if cur != NONE and cur != val:
                    _event(E, S, EV_CONFLICT, tp, off, cur, val, 1, t, p)
                s = omap_get(vslot, vslot_x, val)
                if s < 0 or c_tp[s] != tp:
                    _event(E, S, EV_ODD, tp, val, off, t, p, 0, 0)
                elif c_read[s] == EMPTY:
                    if first_k < 0:
                        first_k = _read_op(S, read_t, read_by, read_by_x, t, p)
                    c_read[s] = first_k
                    if off != narrow_get(c_ack, c_ack_x, s) or p == -1:
                        read_offs[s] = off
            if tp >= 0:
                consumers[(p, tp)] = last
                polled[tp] += run
                drain_end[tp, 4] = t
        elif f == F_POLL and ty != T_INVOKE:
            counts[ty - 1] += 1
        elif f == F_DRAIN and ty == T_OK:
            counts[3] += 1
            tp = ops[k, F_TP]
            held, held_x = maps[3 * tp + DRAINS], maps_x[3 * tp + DRAINS]
            first_k = -1
            got = 0
            for j in range(r0, r1):
                off, val = recs[j, 1], recs[j, 2]
                cur = omap_put(held, held_x, off, val)
                # a value read where the drain had read another (the log changed under
                # it) was read all the same (it is no lost write), but it is no second
                # copy either (no one version of the log held it twice)
                conflicted = cur != NONE and cur != val
                if cur == NONE:
                    got += 1
                elif conflicted:
                    _event(E, S, EV_CONFLICT, tp, off, cur, val, 2, t, 0)
                s = omap_get(vslot, vslot_x, val)
                if s < 0 or c_tp[s] != tp:
                    _event(E, S, EV_ODD, tp, val, off, t, -1, 0, 0)
                    continue
                if c_read[s] == EMPTY:  # then its first drain offset is empty too
                    if first_k < 0:
                        first_k = _read_op(S, read_t, read_by, read_by_x, t, -1)
                    c_read[s] = first_k
                first = narrow_get(c_drain, c_drain_x, s)
                if first == NONE:
                    narrow_set(c_drain, c_drain_x, s, off)
                elif first != off and not conflicted:
                    _event(E, S, EV_DUP, s, off, 0, 0, 0, 0, 0)
            drained[tp] += got
            if ops[k, F_LAST]:
                drain_end[tp, 0] = 1
                drain_end[tp, 1] = t
                drain_end[tp, 2] = ops[k, F_HW]
                drain_end[tp, 3] = ops[k, F_LSO]
        elif f == F_DRAIN and ty != T_INVOKE:
            counts[3 + ty - 1] += 1
        k += 1
    S[S_SLOTS] = n
    return DONE, k, 0
