"""Operations and the history file (docs/history.md, v1).

Owns the op model (:mod:`.ops`), the writer that journals ops as they happen
(:mod:`.writer`), the readers that stream them back checked (:mod:`.reader`) and the
pairing rules those check (:mod:`.pairing`, compiled for the queue checker in
:mod:`faultline.checkers.pairing`). Pure and light: no Kafka client, no cluster code and
no compiler, so checkers, reports, workloads and the Spark pipeline can use it anywhere.

May import: errors, rundir.
"""

from faultline.history.ops import (
    NEMESIS,
    OP_TYPES,
    TIME_MARGIN_NS,
    VALUE_MAX,
    VALUE_MIN,
    Op,
    OpType,
    PendingOp,
    Process,
    TimedOp,
    latest_time,
)
from faultline.history.pairing import (
    F_DRAIN,
    F_NEMESIS,
    F_POLL,
    F_SEND,
    INT64_MAX,
    INT64_MIN,
    OP_TYPE_CODES,
    P_NOT_INT,
    T_INVOKE,
    T_OK,
    pairing_message,
)
from faultline.history.reader import (
    CUT,
    FOLLOW_S,
    ZSTD_MAGIC,
    HistoryFile,
    ReadResult,
    TooLarge,
    check_row,
    history_blocks,
    history_lines,
    iter_rows,
    parse_line,
    read_history,
    unreadable,
)
from faultline.history.writer import HistoryWriter

__all__ = [
    "CUT", "FOLLOW_S", "F_DRAIN", "F_NEMESIS", "F_POLL", "F_SEND", "INT64_MAX", "INT64_MIN",
    "NEMESIS", "OP_TYPES", "OP_TYPE_CODES", "P_NOT_INT", "TIME_MARGIN_NS", "T_INVOKE", "T_OK",
    "VALUE_MAX", "VALUE_MIN",
    "ZSTD_MAGIC", "HistoryFile", "HistoryWriter", "Op", "OpType", "PendingOp", "Process",
    "ReadResult", "TimedOp", "TooLarge", "check_row", "history_blocks", "history_lines",
    "iter_rows", "latest_time", "pairing_message", "parse_line", "read_history", "unreadable",
]
