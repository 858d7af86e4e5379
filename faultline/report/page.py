"""``report.html``: one self-contained page per run that says whether Kafka lost data
under the config tested, and why.

:func:`build_report` reads a stored run directory (docs/history.md): ``test.json``,
the history (``history.jsonl.zst`` or ``history.jsonl``), ``results.json`` (the
checker's verdict, if the run was checked) and ``observations.jsonl`` (optional
white-box samples), and writes
``report.html`` beside them. A results.json that names another history than the
run's (its ``history``, written by ``faultline check``) is refused: its verdict is not
this history's. A run without ``results.json`` (or with one that lacks
the checker's ``measures`` or ``partitions``) is checked in memory, by the same
checker ``faultline check`` runs, and nothing but ``report.html`` is written. The
page embeds everything it shows (bokeh's JavaScript inline, CSS in the page, the
anomaly examples' stories as compressed JSON its script draws into their rows, no
fonts, no file fetched from a network); its only links point at the run's own files
beside it.

What comes from where: the verdict, the anomalies and their examples, what the
guarantees permit and why, the fault windows, total throughput, latency percentiles,
unavailability and each partition's drain come from the checker (``results.json``,
or the in-memory check), never recomputed here. The history is never read here: the
checker's pass leaves its sends as columns (``history.sends.parquet`` beside
results.json, or from the in-memory check when that file is missing or older than the
history), which give what the checker does not measure
(:mod:`faultline.report.measures`): per-partition throughput, the
latency scatter, errors by kind, the span of the sends; the observations add the
leader at each acknowledgement to the checker's stories. With ``metadata.jsonl`` the
page has a "Broker state" section: the white-box invariants and every election
(results.json's ``white_box``, or the in-memory check's when results.json predates
it), and the stories gain the leader and
epoch at the acknowledgement and the election that followed.
"""

from __future__ import annotations

import base64
import gzip
import importlib.metadata
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
import orjson

from faultline.checkers.groups import UNDECIDED
from faultline.checkers.guarantees import CULPRITS, TransactionConfig
from faultline.checkers.partition_faults import PartitionFaults
from faultline.checkers.result import ANOMALIES
from faultline.checkers.stored import check_stored_table
from faultline.checkers.table import HistoryDigest, SendTable, read_digest
from faultline.checkers.whitebox import has_files
from faultline.errors import HistoryError
from faultline.report import measures as m
from faultline.report import plots, stored_results
from faultline.report.stories import Storyteller, cell, secs, text
from faultline.rundir import (
    CLUSTER_FILE,
    GROUP_FILE,
    HISTORY_FILE,
    METADATA_FILE,
    NODES_DIR,
    OBSERVATIONS_FILE,
    PLAIN_HISTORY_FILE,
    REPLICAS_FILE,
    REPORT_FILE,
    RESULTS_FILE,
    SENDS_FILE,
    TEST_FILE,
    find_history,
    history_identity,
    read_jsonl_prefix,
    write_atomic,
)
from faultline.spec import TestSpec

#: Files of a run directory the report links to, with what each holds.
RUN_FILES: tuple[tuple[str, str], ...] = (
    (TEST_FILE, "the test spec as it ran"),
    (HISTORY_FILE, "every client and nemesis operation (zstd-compressed JSON lines)"),
    (PLAIN_HISTORY_FILE, "every client and nemesis operation"),
    (RESULTS_FILE, "the checker's verdict and anomalies"),
    (OBSERVATIONS_FILE, "white-box samples: leader, ISR, HW, LEO per replica"),
    (METADATA_FILE, "the decoded KRaft metadata log"),
    (REPLICAS_FILE, "each replica's record batches (offsets, CRC) after the run"),
    (GROUP_FILE, "the group's committed offsets and its __consumer_offsets replicas after the run"),
    (f"{NODES_DIR}/", "broker configs and logs"),
)


@dataclass(slots=True)
class RunData:
    """A stored run as read from disk, with the checker's results.json object.

    ``stored`` is False when the run had no ``results.json`` and ``results`` is the
    checker's, run in memory by :func:`load_run`.
    """

    run_dir: Path
    spec: TestSpec
    results: dict[str, Any]
    history: HistoryDigest
    truncated: bool
    observations: dict[m.Partition, list[dict[str, Any]]] = field(default_factory=dict)
    stored: bool = True
    #: The number of observations.jsonl's last line when it was cut mid-write (not drawn).
    observations_cut: int | None = None


def build_report(run_dir: Path) -> Path:
    """Write ``run_dir/report.html`` from the stored run and return its path.

    Contract: reads only files inside ``run_dir`` and writes only ``report.html``
    (atomically, through a temporary file beside it). Raises HistoryError for a
    directory that is not a readable run (missing ``test.json`` or the history,
    malformed JSON in the other files, a history that breaks docs/history.md, a stored
    results.json with a value of another type than its schema's or a bucket width that
    makes more than :data:`~faultline.report.measures.MAX_BUCKETS`) and SpecError
    for a ``test.json`` that is unreadable or not a valid spec
    (:meth:`~faultline.spec.TestSpec.load`); each message is one line naming the file.
    """
    run_dir = Path(run_dir)
    run = load_run(run_dir)
    html = render_report(run)
    return write_atomic(run_dir / REPORT_FILE, html.encode())


def load_run(run_dir: Path) -> RunData:
    """Read a run directory into a :class:`RunData` (errors as in :func:`build_report`)."""
    if not run_dir.is_dir():
        raise HistoryError(str(run_dir), None, "not a run directory (no such directory)")
    spec_path = run_dir / TEST_FILE
    if not spec_path.exists():  # one that is there and unreadable: TestSpec.load says why
        raise HistoryError(str(spec_path), None, "missing: is this a run directory?")
    spec = TestSpec.load(spec_path)
    history = read_digest(run_dir / SENDS_FILE, find_history(run_dir))
    results_path = run_dir / RESULTS_FILE
    stored = _read_json(results_path) if results_path.is_file() else None
    if stored is not None and not isinstance(stored, dict):
        raise HistoryError(str(results_path), None, "expected a JSON object")
    if stored is not None:
        _check_stored_types(results_path, stored)
        if (why := stored_results.problem(stored)) is not None:
            raise HistoryError(str(results_path), None, why)
        _check_fault_tokens(results_path, stored)
        _check_same_history(results_path, stored, find_history(run_dir))
    results = stored
    missing = [k for k, kind in _CHECKED.items() if not isinstance((stored or {}).get(k), kind)]
    if "partitions" not in missing and not all(  # from a checker that judged runs, not partitions
            isinstance(x, dict) and "anomaly_counts" in x for x in (stored or {})["partitions"]):
        missing.append("partitions")
    if not isinstance((stored or {}).get("white_box"), dict) and has_files(run_dir):  # an older checker's
        missing.append("white_box")
    if results is None or missing or history is None:
        checked, history = _check(run_dir)
        results = checked if stored is None else {
            **stored, **{k: checked[k] for k in missing if k in checked}}
    buckets = m.bucket_count(history.end_time, _measures(results))
    if buckets > m.MAX_BUCKETS:  # only a results.json or table of another checker's: it bounds times
        raise HistoryError(str(results_path), None, (
            f"measures.bucket_ns {m.bucket_width(_measures(results))} makes {buckets} buckets over "
            f"the run's {history.end_time / 1e9:g} s (its {SENDS_FILE}), and a report draws at most "
            f"{m.MAX_BUCKETS}: `faultline check {run_dir}` judges the run again"))
    observations, cut = _read_observations(run_dir / OBSERVATIONS_FILE)
    return RunData(run_dir, spec, results, history, history.truncated, observations, stored is not None, cut)


#: results.json extras the page needs from the checker (facts, not a verdict): a stored
#: results.json without them (hand-written, or from an older checker) gets them from
#: an in-memory check, its verdict kept.
_CHECKED: Mapping[str, type] = {"measures": dict, "partitions": list}


def _check(run_dir: Path) -> tuple[dict[str, Any], HistoryDigest]:
    """The results.json object ``faultline check`` would write and the history's sends as
    columns, from one pass of the same function
    (:func:`~faultline.checkers.stored.check_stored_table`), in memory.

    Not :func:`~faultline.checkers.results_file.check_run`: the report must write nothing but
    report.html (a stored verdict is the user's to make). A history the checker cannot
    read raises its HistoryError; a checker that failed leaves no sends to draw.
    """
    result, table = check_stored_table(run_dir)
    return result.to_json(), table or HistoryDigest(SendTable.of([]), [], 0, 0, None, 0, False)


#: The types the page relies on, of results.json's fields docs/history.md lists.
_STORED_TYPES: Mapping[str, type] = {"anomaly_counts": dict, "anomalies": dict, "permitted": list,
                                     "violations": list, "unknown": list, "stats": dict,
                                     "permitted_reasons": dict, "forbidden_reasons": dict}


def _check_stored_types(path: Path, stored: dict[str, Any]) -> None:
    """HistoryError naming the field when a stored results.json's field has the wrong type."""
    for key, kind in _STORED_TYPES.items():
        if key in stored and not isinstance(stored[key], kind):
            want = "an object" if kind is dict else "a list"
            raise HistoryError(str(path), None, f"{key}: expected {want}, got {stored[key]!r:.40}")
    for key in ("permitted", "violations"):  # anomaly names
        if not all(isinstance(x, str) for x in stored.get(key) or ()):
            raise HistoryError(str(path), None, f"{key}: expected a list of anomaly names")
    bad = [k for k, v in (stored.get("anomalies") or {}).items() if not isinstance(v, list)]
    if bad:
        raise HistoryError(str(path), None, f"anomalies.{bad[0]}: expected a list")
    if "send" in (stats := stored.get("stats") or {}) and not isinstance(stats["send"], dict):
        raise HistoryError(str(path), None, "stats.send: expected an object")


def _check_fault_tokens(path: Path, stored: dict[str, Any]) -> None:
    """HistoryError naming the field when a stored results.json's fault tokens
    (``faults_seen``, ``partitions[].faults``) are no faults
    (:meth:`~faultline.checkers.partition_faults.PartitionFaults.from_tokens`)."""
    fields = [("faults_seen", stored.get("faults_seen"))] + [
        (f"partitions[{i}].faults", x.get("faults")) for i, x in enumerate(stored.get("partitions") or ())
        if isinstance(x, dict)]
    for where, tokens in fields:
        if isinstance(tokens, list):
            try:
                PartitionFaults.from_tokens(tokens)
            except ValueError as e:
                raise HistoryError(str(path), None, f"{where}: {e}") from None


def _fault_words(tokens: Sequence[str]) -> str:
    """results.json's fault tokens for a person
    (:meth:`~faultline.checkers.partition_faults.PartitionFaults.words`)."""
    return PartitionFaults.from_tokens(tokens).words()


def _check_same_history(path: Path, stored: dict[str, Any], history: Path) -> None:
    """HistoryError when a stored results.json names a history (its ``history``,
    :func:`~faultline.rundir.history_identity`) other than ``history`` as it is now: its
    verdict is not this history's. One from a checker that did not name it is taken as it is."""
    said = stored.get("history")
    if said is None:
        return
    if not isinstance(said, dict):
        raise HistoryError(str(path), None, f"history: expected an object, got {said!r:.40}")
    now = history_identity(history)
    if said != now:
        same = " (the same size, another end)" if said.get("bytes") == now["bytes"] else ""
        raise HistoryError(str(path), None, (
            f"judged {said.get('file')} of {said.get('bytes')} bytes, not the {now['file']} of "
            f"{now['bytes']} bytes here{same}: its verdict is another history's; run "
            f"`faultline check {path.parent}` to judge this one"))


def _read_json(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as e:
        raise HistoryError(str(path), None, f"not valid JSON ({e})") from None
    except OSError as e:
        raise HistoryError(str(path), None, f"cannot read: {e.strerror}") from None


def _read_observations(path: Path) -> tuple[dict[m.Partition, list[dict[str, Any]]], int | None]:
    """observations.jsonl lines with topic, partition and time, grouped and sorted by time,
    and the number of a cut last line, which ends them (:func:`~faultline.rundir.read_jsonl_prefix`);
    HistoryError naming the line for one whose fields the page draws have the wrong type."""
    out: dict[m.Partition, list[dict[str, Any]]] = {}
    if not path.is_file():
        return out, None
    read = read_jsonl_prefix(path)
    for lineno, d in enumerate(read.objects, 1):
        if (not isinstance(d.get("time"), int) or not isinstance(d.get("partition"), int)
                or not all(isinstance(d.get(k), int | None) for k in ("leader", "hw"))
                or not isinstance(d.get("isr", []), list)):
            raise HistoryError(str(path), lineno, "expected an object with time, topic, partition "
                                                  "(leader and hw integers or null, isr a list)")
        out.setdefault((str(d.get("topic", "")), int(d["partition"])), []).append(d)
    for samples in out.values():
        samples.sort(key=lambda d: d["time"])
    return out, read.cut


# --- what the page says --------------------------------------------------------------


def config_line(spec: TestSpec) -> str:
    """The config under test in one line: what decides which anomalies are permitted (in
    a txn run, the client and the transaction protocol version its transactions used)."""
    t, p, k, n = spec.topic, spec.producer, spec.kafka, spec.nemesis
    faults = f"{', '.join(n.faults)} every {n.interval_s:g} s" if n.faults else "none"
    txn = ([f"{spec.workload.client} client, transaction protocol "
            f"{TransactionConfig.from_spec(spec).protocol}"] if spec.workload.name == "txn" else [])
    return " · ".join([
        f"acks={p.acks}", f"idempotence {'on' if p.enable_idempotence else 'off'}",
        f"max.in.flight={p.max_in_flight}", f"min.insync.replicas={t.min_insync_replicas}",
        f"RF={t.replication_factor}", f"{t.partitions} partitions",
        f"unclean election {'on' if t.unclean_leader_election_enable else 'off'}",
        f"Kafka {k.version} × {k.nodes} nodes", *txn, f"faults: {faults}",
        f"{spec.time_limit_s:g} s", f"seed {spec.seed}",
    ])


def cluster_note(run_dir: Path) -> str:
    """What the cluster was, from ``cluster.json`` when the run has one: whether it ran
    with eligible leader replicas (KIP-966), as its metadata log showed."""
    if not (run_dir / CLUSTER_FILE).is_file():  # none, or one whose reading never ends (a FIFO)
        return ""
    try:
        facts = orjson.loads((run_dir / CLUSTER_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return ""
    elr = facts.get("eligible_leader_replicas") if isinstance(facts, dict) else None
    state = "on" if elr is True else "off" if elr is False else "not known"
    return f" · eligible leader replicas {state}"


@dataclass(frozen=True, slots=True)
class Headline:
    """The headline: ``kind`` is valid / invalid / unknown (the page's color)."""

    kind: str
    word: str
    loss: str
    why: str


def verdict(run: RunData) -> Headline:
    """Whether data was lost, and why, from the checker's results only.

    Whatever the verdict, a loss is stated as decided only where it was: with anything
    the checker could not decide (an unfinished or short drain, a cut history) a count of
    lost writes is a floor, with unread broker state (:func:`_count_doubt`) it is not
    established, and none lost is undecided. An unknown verdict still names the
    forbidden anomalies the checker saw."""
    r = run.results
    counts = _counts(r)
    lost = counts.get("lost-write", 0)
    permitted = set(r.get("permitted") or ())
    reasons = r.get("permitted_reasons") or {}
    undecided = _undecided(r)
    unsure = _count_doubt(r)
    writes = f"{lost} acknowledged write{'s' if lost != 1 else ''}"
    loss = (f"{writes} counted lost, not established ({unsure})" if lost and unsure else
            f"{'at least ' if undecided else ''}{writes} lost" if lost else
            "data loss undecided" if undecided else "no acknowledged write lost")
    seen = [f"{a} ×{counts[a]}" for a in _types(r) if counts.get(a)]
    violations = list(r.get("violations") or ())
    valid = r.get("valid")
    if valid is False:
        what = (", ".join(_violation_count(r, a, counts.get(a, 0)) for a in violations)
                or "a forbidden anomaly")
        also = ("; undecided: " + ", ".join(_unknown_where(u) for u in undecided)) if undecided else ""
        return Headline("invalid", "INVALID", loss,
                       f"{what}: forbidden by Kafka's guarantees for {_under(run)}{also}")
    if valid is True:
        if seen:
            by_reason: dict[str, list[str]] = {}  # one reason often permits several types
            for a in _types(r):
                if counts.get(a) and a in permitted:
                    by_reason.setdefault(reasons.get(a, ""), []).append(a)
            allowed = [", ".join(names) + (f": {why}" if why else "") for why, names in by_reason.items()]
            return Headline("valid", "VALID", loss, "seen but permitted: " + "; ".join(allowed or seen))
        return Headline("valid", "VALID", loss, f"no anomaly seen; the guarantees held for {_under(run)}")
    unknown = [_unknown_text(u) for u in undecided]
    if violations:  # seen where forbidden, as far as it could be judged: never left unsaid
        what = ", ".join(_violation_count(r, a, counts.get(a, 0)) for a in violations)
        unknown.insert(0, f"{what} seen where Kafka's guarantees for {_under(run)} forbid it, "
                          "as judged without what is undecided")
    return Headline("unknown", "UNKNOWN", loss, "; ".join(unknown) or "the checker could not decide")


def _undecided(r: Mapping[str, Any]) -> list[Any]:
    """results.json's ``unknown`` entries that affect the verdict."""
    return [u for u in r.get("unknown") or () if not isinstance(u, dict) or u.get("affects_verdict", True)]


def _count_doubt(r: Mapping[str, Any]) -> str:
    """The ``unknown`` kinds that leave the count of lost writes itself not established,
    e.g. ``broker-state-unreadable``, or '': broker state the check could not read might
    set aside writes it counted lost (a drain that skipped what every replica holds), so
    that count is no floor."""
    return ", ".join(dict.fromkeys(u["kind"] for u in _undecided(r) if isinstance(u, dict)
                                   and u.get("kind") == "broker-state-unreadable"))


def _violation_count(r: Mapping[str, Any], name: str, total: int) -> str:
    """``lost-write ×4``, or, when some of them were seen on partitions that permit
    them, how many were on the partitions that forbid them, and which those are."""
    where = [x for x in _summaries(r).values() if name in (x.get("violations") or ())]
    there = sum(int((x.get("anomaly_counts") or {}).get(name, 0)) for x in where)
    if not where or there >= total:
        return f"{name} ×{total}"
    parts = ", ".join(f"{x.get('topic', '')}/{x['partition']}" for x in where)
    return f"{name} ×{there} on {parts} (of {total} seen)"


def _under(run: RunData) -> str:
    """The config and faults the guarantees were judged against, in a phrase."""
    t, p = run.spec.topic, run.spec.producer
    seen = (run.results).get("faults_seen")
    faults = _fault_words(seen) if isinstance(seen, list) else ", ".join(run.spec.nemesis.faults)
    return (f"acks={p.acks}, min.insync.replicas={t.min_insync_replicas}, "
            f"{'unclean' if t.unclean_leader_election_enable else 'clean'} elections"
            + (f" under {faults}" if faults else ", no faults"))


def _unknown_text(u: Any) -> str:
    """An ``unknown`` entry ({kind, why, topic?, partition?, count?}) as one line."""
    if not isinstance(u, dict):
        return text(u)
    where = f" {u['topic']}/{u['partition']}" if "topic" in u and "partition" in u else ""
    count = f" ×{u['count']}" if isinstance(u.get("count"), int) else ""
    return f"{u.get('kind', 'unknown')}{where}{count}: {u.get('why', '')}".rstrip(": ")


def _unknown_where(u: Any) -> str:
    """An ``unknown`` entry's kind and partition, in a few words."""
    if not isinstance(u, dict):
        return text(u)
    where = f" {u['topic']}/{u['partition']}" if "topic" in u and "partition" in u else ""
    return f"{u.get('kind', 'unknown')}{where}"


def _counts(r: Mapping[str, Any]) -> dict[str, int]:
    counts = r.get("anomaly_counts") or {}
    return {str(k): int(v) for k, v in counts.items() if isinstance(v, int)}


def _types(r: Mapping[str, Any]) -> list[str]:
    """Every anomaly type results.json names, DESIGN's first, then any others."""
    named = set(_counts(r)) | set(r.get("anomalies") or {}) | set(r.get("permitted") or ())
    return [a for a in ANOMALIES if a in named] + sorted(named - set(ANOMALIES))


#: ``unknown`` kinds that leave undecided whether any anomaly seen is permitted: the
#: broker state the guarantees were judged against is unreadable or disagrees.
_DOUBTED_EVERYWHERE = frozenset(("broker-state-disagrees", "broker-state-unreadable"))


def doubts(r: Mapping[str, Any]) -> dict[str, list[tuple[str, m.Partition | None]]]:
    """Per anomaly type seen, the ``unknown`` entries saying that whether it is permitted
    is not established, as (kind, partition; None for every partition): a
    ``permitted-on-assumption`` entry names its partition's types (``anomalies``; from a
    checker that did not name them, every type seen there and not forbidden there); a
    group checker's (:data:`~faultline.checkers.groups.UNDECIDED`) names the types it left
    undecided, on any partition, but a type it found violated stays violated."""
    seen = [a for a, n in _counts(r).items() if n]
    violations = set(r.get("violations") or ())
    summaries = _summaries(r)
    out: dict[str, list[tuple[str, m.Partition | None]]] = {}
    for u in _undecided(r):
        kind = u.get("kind") if isinstance(u, dict) else None
        if kind in _DOUBTED_EVERYWHERE:
            for a in seen:
                out.setdefault(a, []).append((kind, None))
        elif kind == "permitted-on-assumption" and isinstance(u.get("partition"), int):
            part = (str(u.get("topic", "")), u["partition"])
            x = summaries.get(part, {})
            names = u.get("anomalies") if isinstance(u.get("anomalies"), list) else [
                a for a, n in (x.get("anomaly_counts") or {}).items()
                if n and a not in (x.get("violations") or ())]
            for a in names:
                out.setdefault(str(a), []).append((kind, part))
        elif kind in UNDECIDED and isinstance(u.get("anomalies"), list):
            for a in u["anomalies"]:
                if a not in violations:
                    out.setdefault(str(a), []).append((kind, None))
    return out


def applying(doubted: Sequence[tuple[str, m.Partition | None]], forbidden: bool,
             part: tuple[str, Any] | None = None) -> list[tuple[str, m.Partition | None]]:
    """Of a type's doubts (:func:`doubts`), those that leave a judgement of it open. One
    that it is forbidden only by a doubt on every partition (the broker state it was
    judged against), as a partition's assumed faults only widen what it permits; one
    that it is permitted also by a doubt on its partition ``part`` (None: any)."""
    return [(k, q) for k, q in doubted if q is None or (not forbidden and part in (None, q))]


def _doubt_text(entries: Sequence[tuple[str, m.Partition | None]]) -> str:
    """``permitted-on-assumption fl-queue/1, broker-state-disagrees``."""
    return ", ".join(dict.fromkeys(k + (f" {p[0]}/{p[1]}" if p else "") for k, p in entries))


def expectations(run: RunData) -> list[dict[str, Any]]:
    """Per anomaly type: expected (permitted or forbidden, and why) beside what happened.

    A type seen and permitted whose permission rests on what the checker could not
    establish (:func:`doubts`) is ``doubted``, never plainly ``permitted``."""
    r = run.results
    counts, permitted = _counts(r), set(r.get("permitted") or ())
    violations = set(r.get("violations") or ())
    forbidden, allowing = r.get("forbidden_reasons") or {}, r.get("permitted_reasons") or {}
    doubted = doubts(r)
    rows = []
    for a in _types(r):
        n = counts.get(a, 0)
        allowed = a in permitted
        forbidden_seen = a in violations or bool(n and not allowed)
        doubt = applying(doubted.get(a, ()), forbidden_seen)
        status = ("doubted" if doubt else "violation") if forbidden_seen else (
            ("doubted" if doubt else "permitted") if n else "none")
        # a violation says which guarantee broke, also where another partition permits it
        said = ([forbidden.get(a), allowing.get(a) and f"permitted: {text(allowing[a])}"]
                if forbidden_seen else [allowing.get(a) or forbidden.get(a)])
        reason = "; ".join(text(x) for x in said if x)
        if status == "doubted":
            judged = (f"forbidden as judged{': ' + reason if reason else ''}" if forbidden_seen
                      else f"permitted only if {reason}")
            reason = f"not established ({_doubt_text(doubt)}): {judged}"
        rows.append({"name": a, "count": n, "permitted": allowed, "partly": allowed and a in forbidden,
                     "reason": reason or ("" if allowed or not n else f"forbidden for {_under(run)}"),
                     "status": status})
    return rows


# --- anomaly examples, measures, tables, page -----------------------------------------

_LEAD_KEYS = ("topic", "partition", "value", "offset", "offsets", "values", "process", "time")
#: Keys shown elsewhere than in a column: the story, the explanation, the row's badge.
_STORY_KEYS = frozenset(("story", "explanation", "sightings", "permitted", "copies",
                         "client_events"))


def who_broke_it(r: Mapping[str, Any], name: str) -> list[str]:
    """Per cause of anomaly ``name`` (results.json ``causes``): how many, who is to blame
    and why (:data:`~faultline.checkers.guarantees.CULPRITS`); empty when not attributed."""
    causes = (r.get("causes") or {}).get(name) or {}
    out = []
    for cause, n in causes.items():
        who, why = CULPRITS.get(cause, ("unknown", "an unknown cause"))
        out.append(f"{cause} ×{n} ({who}): {why}")
    return out


def anomaly_sections(run: RunData) -> list[dict[str, Any]]:
    """Per anomaly type seen: every example results.json holds (at most
    :data:`~faultline.checkers.result.MAX_ANOMALY_EXAMPLES`) as a table row with its story;
    never downsampled. Forbidden examples come first, and where the type has permitted
    ones too (``mixed``) each forbidden one is marked. The page writes each row's
    fields, mark and doubt as HTML, and its story and explanation once, in
    :func:`stories_payload`."""
    r = run.results
    counts = _counts(r)
    teller = Storyteller(run.history, run.observations, _white_box(r).get("leader_changes") or ())
    expected = {e["name"]: e for e in expectations(run)}
    doubted = doubts(r)
    out = []
    for a in _types(r):
        examples = [e for e in (r.get("anomalies") or {}).get(a) or () if isinstance(e, dict)]
        total = max(counts.get(a, 0), len(examples))
        if not total:
            continue
        keys = [k for k in _LEAD_KEYS if any(k in e for e in examples)]
        keys += sorted({k for e in examples for k in e} - set(keys) - _STORY_KEYS)
        rows = [{"cells": [cell(k, e[k]) if k in e else "" for k in keys],
                 "value": e.get("value") if isinstance(e.get("value"), int) else "",
                 "permitted": e.get("permitted") if isinstance(e.get("permitted"), bool) else None,
                 "story": teller.lines(e),
                 "explanation": text(e["explanation"]) if e.get("explanation") else "",
                 "doubt": _example_doubt(e, doubted.get(a, ()))} for e in examples]
        for row in rows:  # a certain violation only where nothing leaves it in doubt
            row["violation"] = row["permitted"] is False and not row["doubt"]
        rows.sort(key=lambda row: row["permitted"] is not False)  # the forbidden first, marked
        out.append({"name": a, "count": total, "columns": keys, "rows": rows, "shown": len(rows),
                    "mixed": len({row["permitted"] for row in rows}) > 1,
                    "causes": who_broke_it(r, a),
                    **{k: expected[a][k] for k in ("status", "reason")}})
    return out


def stories_payload(sections: Sequence[Mapping[str, Any]]) -> str:
    """Every row's story and explanation, ``{anomaly: [[lines, explanation], ...]}`` in
    the rows' order, as gzip-compressed JSON in base64: the page's script draws a
    section's stories into its rows when the section is open.

    Why not as HTML: a story and its explanation are ~1 KB a row, mostly text shared
    with the type's other examples (the faults that followed, the verdict's sentence),
    so 1,000 examples of each of several types would pass the page's 5 MB; compressed,
    they are a tenth of that, and no row is left out."""
    stories = {a["name"]: [[row["story"], row["explanation"]] for row in a["rows"]] for a in sections}
    return base64.b64encode(gzip.compress(orjson.dumps(stories), mtime=0)).decode("ascii")


def _example_doubt(e: Mapping[str, Any], doubted: Sequence[tuple[str, m.Partition | None]]) -> str:
    """For an example whose judgement is not established (:func:`doubts`, :func:`applying`),
    a line saying so; else ''. A group example is judged by itself: its own ``unknown``
    kind, not its type's, leaves it undecided."""
    permitted, own = e.get("permitted"), e.get("unknown")
    if not isinstance(permitted, bool):
        return ""
    here: list[tuple[str, m.Partition | None]] = [(own, None)] if isinstance(own, str) else []
    here += [d for d in applying(doubted, not permitted, (str(e.get("topic", "")), e.get("partition")))
             if d[0] not in UNDECIDED]
    if not here:
        return ""
    whether = "Whether" if permitted or own else "Judged forbidden, but whether"
    return f"{whether} it is permitted is not established ({_doubt_text(here)}): see undecided above."


def _partitions(run: RunData) -> list[m.Partition]:
    t = run.spec.topic
    return sorted({(t.name, i) for i in range(t.partitions)} | set(_summaries(run.results)))


def _measures(r: Mapping[str, Any]) -> dict[str, Any]:
    ms = r.get("measures")
    return ms if isinstance(ms, dict) else {}


def _summaries(r: Mapping[str, Any]) -> dict[m.Partition, dict[str, Any]]:
    """results.json's ``partitions`` entries, by partition."""
    return {(str(x.get("topic", "")), x["partition"]): x for x in r.get("partitions") or ()
            if isinstance(x, dict) and isinstance(x.get("partition"), int)}


def availability(run: RunData) -> dict[m.Partition, m.Availability]:
    """Per partition: the checker's unavailability windows and ok sends; the fraction
    available is over the span of the sends."""
    summary = _summaries(run.results)
    acked = {p: int((summary.get(p, {}).get("sends") or {}).get("ok", 0)) for p in _partitions(run)}
    h = run.history
    return m.availability(_measures(run.results), acked, h.first_send or 0, h.last_send)


def plot_data(run: RunData, faults: Sequence[m.FaultWindow],
              avail: Mapping[m.Partition, m.Availability]) -> plots.PlotData:
    """Bounded series for the plots: buckets and a downsampled scatter.

    Total throughput and latency percentiles are the checker's measures (in its
    buckets); per-partition throughput, the raw latency scatter and errors by kind
    come from the history, in the same buckets.
    """
    h, ms = run.history, _measures(run.results)
    end = max(h.end_time, 1)
    b = m.Buckets.over(end, ms)
    thr = {"all": m.total_throughput(ms, b), **m.throughput(h.sends, b)}
    pts = m.latency_points(h.sends)
    bands = [plots.Band(w.f, w.start / 1e9, (w.end if w.end is not None else end) / 1e9,
                        w.f + (f" n{','.join(map(str, w.nodes))}" if w.nodes else ""), w.end is None)
             for w in faults]
    traces = {f"{p[0]}/{p[1]}": _trace(ss) for p, ss in sorted(run.observations.items())}
    return plots.PlotData(
        duration=end / 1e9, bucket_width=b.width / 1e9, bucket_starts=[s / 1e9 for s in b.starts],
        bands=bands, throughput=thr, scatter_t=pts.invoke_s, scatter_ms=pts.latency_ms,
        scatter_outcome=pts.outcome, scatter_total=pts.total, percentiles=m.percentiles(ms, b),
        errors=m.errors_by_kind(h.errors, b),
        unavailable={f"{p[0]}/{p[1]}": [(a / 1e9, z / 1e9) for a, z in v.windows] for p, v in avail.items()},
        traces=traces)


def _trace(samples: Sequence[Mapping[str, Any]]) -> plots.Trace:
    """One partition's observations as a trace: a sample without a HW (it could not be
    read) is a gap, never a HW of 0; a deposed leader's stale answer (:func:`m.stale_hw`)
    a gap too, and a mark of its own."""
    stale = m.stale_hw(samples)
    return plots.Trace(
        [s["time"] / 1e9 for s in samples], [float(s.get("leader", -1) or -1) for s in samples],
        [float(len(s.get("isr") or ())) for s in samples],
        [None if newest is not None else s.get("hw") for s, newest in zip(samples, stale, strict=True)],
        [plots.StaleHW(s["time"] / 1e9, s["hw"], s["hw_epoch"], newest)
         for s, newest in zip(samples, stale, strict=True) if newest is not None])


def partition_rows(run: RunData, avail: Mapping[m.Partition, m.Availability]) -> list[dict[str, Any]]:
    """Per partition: acks, availability, longest outage and what the drain found
    (the checker's ``partitions``)."""
    r = run.results
    summary = _summaries(r)
    doubted_all, unsure = doubts(r), _count_doubt(r)
    rows = []
    for p in _partitions(run):
        a, x = avail.get(p), summary.get(p, {})
        longest = max((z - s for s, z in a.windows), default=0) if a else 0
        drained, hw, lso = x.get("drained", 0), x.get("high_watermark"), x.get("log_start_offset")
        counts = x.get("anomaly_counts") or {}
        lost = int(counts.get("lost-write", 0))
        violations = list(x.get("violations") or ())
        reasons = x.get("permitted_reasons") or {}
        doubted = applying(doubted_all.get("lost-write", ()), False, p)
        everywhere = {a: applying(doubted_all.get(a, ()), True) for a in violations}
        certain = [a for a in violations if not everywhere[a]]
        judged = [a for a in violations if everywhere[a]]
        said = ([f"forbidden: {', '.join(certain)}"] if certain else []) + (
            [f"not established ({_doubt_text([d for a in judged for d in everywhere[a]])}): "
             f"forbidden as judged: {', '.join(judged)}"] if judged else [])
        why = ("; ".join(said) if violations else
               f"not established ({_doubt_text(doubted)}): permitted only if {text(reasons['lost-write'])}"
               if lost and "lost-write" in reasons and doubted else
               text(reasons["lost-write"]) if lost and "lost-write" in reasons else "")
        agreed = x.get("replicas_agree_to")
        complete = bool(x.get("complete"))
        short = isinstance(agreed, int) and isinstance(hw, int) and agreed > hw
        rows.append({
            "name": f"{p[0]}/{p[1]}", "acked": a.acked if a else 0,
            "availability": f"{100 * a.fraction:.1f}%" if a else "-",
            "outages": len(a.windows) if a else 0, "longest": f"{longest / 1e9:.2f} s" if longest else "-",
            "drained": drained, "hw": "-" if hw is None else hw, "log_start": "-" if lso is None else lso,
            "complete": complete, "violation": bool(certain), "short": short,
            # a partition not drained to its end has no decided count of lost writes
            "lost": ((f"{lost}, not established ({unsure})" if lost and unsure else lost)
                     if complete and not short else
                     f"{lost}, undecided past {hw}" if complete else "undecided"),
            "agreed": "-" if agreed is None else agreed,
            "faults": _fault_words(x.get("faults") or ()) or "none", "why": why,
        })
    return rows


def _white_box(r: Mapping[str, Any]) -> dict[str, Any]:
    wb = r.get("white_box")
    return wb if isinstance(wb, dict) else {}


#: How the election table names each kind of leader change (whitebox.leader_changes).
ELECTION_KINDS: Mapping[str, str] = {
    "isr": "clean, from the ISR", "elr": "clean, from the ELR",
    "last-known-leader": "unclean: last known leader (KIP-966)", "unclean": "UNCLEAN",
    "offline": "no leader", "unknown": "state before unknown",
}


def broker_state(run: RunData) -> dict[str, Any] | None:
    """The "Broker state" section: invariants and the election timeline, from
    results.json's ``white_box``; None when the run has no metadata.jsonl."""
    if not (run.run_dir / METADATA_FILE).is_file():
        return None
    wb = _white_box(run.results)
    valid = wb.get("valid")
    invariants = [{
        "name": text(i.get("name", "")), "status": text(i.get("status", "")),
        "checked": i.get("checked", 0), "violations": i.get("violations", 0),
        "permitted": i.get("permitted", 0), "summary": text(i.get("summary", "")),
        "examples": [{"time": secs(e["time"]) if isinstance(e.get("time"), int) else "-",
                      "partition": e.get("partition", ""), "what": text(e.get("what", "")),
                      "permitted": bool(e.get("permitted"))} for e in i.get("examples") or ()
                     if isinstance(e, dict)],
    } for i in wb.get("invariants") or () if isinstance(i, dict)]
    elections = [{
        "time": secs(c["time"]) if isinstance(c.get("time"), int) else "-", "partition": c.get("partition"),
        "change": f"{_node(c.get('from'))} → {_node(c.get('to'))}", "epoch": c.get("epoch"),
        "kind": text(c.get("kind", "")), "label": ELECTION_KINDS.get(str(c.get("kind")), text(c.get("kind"))),
        "isr_before": text(c.get("isr_before")), "elr_before": text(c.get("elr_before")),
        "offset": c.get("offset"),
    } for c in wb.get("leader_changes") or () if isinstance(c, dict)]
    return {"valid": "held" if valid is True else "VIOLATED" if valid is False else "unknown",
            "kind": "valid" if valid is True else "invalid" if valid is False else "unknown",
            "invariants": invariants, "elections": elections,
            "errors": [text(e) for e in wb.get("errors") or ()], "topic": text(wb.get("topic", ""))}


def _node(n: Any) -> str:
    return f"n{n}" if isinstance(n, int) else "none"


def _files(run_dir: Path) -> list[dict[str, str]]:
    out = []
    for name, what in RUN_FILES:
        path = run_dir / name.rstrip("/")
        if path.exists():
            size = "" if path.is_dir() else _size(path.stat().st_size)
            out.append({"href": name, "name": name, "what": what, "size": size})
    return out


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("faultline.report", "templates"),
                              autoescape=jinja2.select_autoescape(("html", "j2")),
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render_report(run: RunData) -> str:
    """The page's HTML for ``run`` (what :func:`build_report` writes)."""
    started = time.perf_counter()
    h, r = run.history, run.results
    faults = m.fault_windows(_measures(r))
    avail = availability(run)
    rendered = plots.render(plot_data(run, faults, avail))
    spec = run.spec
    wall = (datetime.fromtimestamp(spec.start_wall_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            if spec.start_wall_ms else "start time not recorded")
    sends = (r.get("stats") or {}).get("send") or {}
    seen = r.get("faults_seen")
    threshold = _measures(r).get("unavailable_after_ns")
    sections = anomaly_sections(run)
    html = _env().get_template("report.html.j2").render(
        spec=spec, run_name=run.run_dir.name, wall=wall, duration=secs(h.end_time),
        verdict=verdict(run), config=config_line(spec) + cluster_note(run.run_dir), ops=h.ops,
        truncated=run.truncated,
        sends={k: sends.get(k, 0) for k in ("ok", "fail", "info")},
        sends_open=(r.get("stats") or {}).get("send_open", 0),
        undecided=bool(_undecided(r)),
        expectations=expectations(run), unknown=[_unknown_text(u) for u in r.get("unknown") or ()],
        faults_seen=_fault_words(seen) if isinstance(seen, list) else "",
        threshold=f"{(threshold if isinstance(threshold, int) else 1_000_000_000) / 1e9:g} s",
        stored=run.stored, anomalies=sections, stories=stories_payload(sections),
        partitions=partition_rows(run, avail), faults=[
            {"f": w.f, "nodes": ", ".join(map(str, w.nodes)), "start": secs(w.start),
             "end": secs(w.end) if w.end is not None else "never healed", "detail": w.detail,
             "color": plots.fault_color(w.f)} for w in faults],
        has_observations=bool(run.observations), observations_cut=run.observations_cut,
        plots=rendered, files=_files(run.run_dir),
        broker=broker_state(run),
        version=_version(), generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"))
    return html.replace("<!--render-ms-->", f"{(time.perf_counter() - started) * 1000:.0f} ms", 1)


def _version() -> str:
    try:
        return importlib.metadata.version("kafka-faultline")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - not installed
        return "dev"
