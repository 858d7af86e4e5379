"""Running a sweep: every cell not yet done, one after another, each through the same
:func:`faultline.run.runner.run_test` as ``faultline run``, into ``SWEEP_DIR/cells/<id>/``.

::

    SWEEP_DIR/sweep.json      the manifest (:mod:`.manifest`), rewritten after every change
    SWEEP_DIR/matrix.yaml     a copy of the matrix; a rerun with another matrix is refused
    SWEEP_DIR/cells/<id>/     one run directory per cell

Before the first run: the disk the cells left and the analysis of every cell need is
estimated (:func:`disk_needed`) and a sweep that would not fit is refused with the
figure. A cell that errors is recorded ``failed`` with its one-line error and the sweep
goes on; each cell runs in a process of its own (:func:`run_isolated`), so that a cell
whose process dies (a client library's failed assertion aborts it) is such an error too. Ctrl-C: the cell
being run tears its cluster down (``run_test`` does), is recorded ``failed``
(``interrupted``), and :class:`KeyboardInterrupt` propagates with the manifest saved.
A cell's directory left by a failed or interrupted attempt is removed before the
cell runs again.

With :class:`Workers` (a Spark cluster: :mod:`.spark_cells`) the cells run there, as many
at once as it has slots, each by the same :func:`run_once`; this process alone writes
the manifest, as each cell's result comes back.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import click
import orjson
import yaml
from rich.console import Console
from rich.text import Text

from faultline.checkers.result import Valid
from faultline.cluster import kafka_dist
from faultline.errors import SetupError, SpecError
from faultline.run.runner import LiveLine, RunOutcome, run_test
from faultline.rundir import RESULTS_FILE, write_atomic
from faultline.spec import TestSpec
from faultline.sweep.manifest import (
    MATRIX_FILE,
    CellState,
    Manifest,
    Status,
    load,
    plan,
    utc_now,
)
from faultline.sweep.matrix import Cell, Matrix
from faultline.workloads.clients import WorkloadStats
from faultline.yamlfile import read_yaml_mapping

#: Bytes of run directory a cell costs, at most, per second of its main phase
#: (:data:`RUN_BYTES_PER_S`: polls, observations, the broker logs' share) and per
#: acknowledged send (:data:`HISTORY_BYTES_PER_SEND`: invoke, completion, drain, its row
#: of history.sends.parquet). Fitted to examples/smoke.yaml's 8 cells: 19-23 B per send at
#: full speed (74.6 MB for 3,792,587 sends), 74 B at 2,000 sends/s.
RUN_BYTES_PER_S = 110_000
HISTORY_BYTES_PER_SEND = 24
#: Sends per second a full-speed workload (``rate`` 0) reaches on this project's 2-core
#: machine, at most: 110,671/s measured in examples/smoke.yaml's night of 2026-11-30
#: (acks=1, lose-unflushed, min.insync.replicas=1).
FULL_SPEED_SENDS_PER_S = 115_000
#: History lines a send costs, about (its invoke and completion; polls read records in
#: batches), and the lines per second per core the analysis (``faultline analyze``, the
#: Spark pipeline) gets through: that night's analysis checked and wrote 79.4 M lines in
#: 99 s on 2 cores (401,000 a core), benchmarks/bench_pipeline.py 423,000 to 464,000 per
#: CPU second (8 runs x 1 M lines).
HISTORY_LINES_PER_SEND = 2
ANALYSIS_LINES_PER_CORE_S = 400_000
#: Bytes of analysis tables (``SWEEP_DIR/analysis/tables``, the same disk) per history
#: line, at most: 4.9 B measured on that night (385 MB, 379 MB of them the ops table, for
#: 79.4 M lines; the ops table is zstd).
ANALYSIS_BYTES_PER_LINE = 10
#: Seconds a cell takes beyond its main phase (cluster start, heal, drain, check,
#: report) before one has been measured.
CELL_OVERHEAD_S = 40.0


#: Seconds a cell's process gets, after Ctrl-C, to tear its cluster down.
INTERRUPT_GRACE_S = 120.0


class RunCell(Protocol):
    """How a cell is run: :func:`faultline.run.runner.run_test`'s signature, in part."""

    def __call__(self, spec: TestSpec, *, console: Console | None = ...,
                 run_dir: Path | None = ...) -> RunOutcome: ...


class Workers(Protocol):
    """Machines that run a sweep's cells in place of this one, ``slots`` cells at once."""

    @property
    def slots(self) -> int: ...

    def check(self, sweep_dir: Path) -> None:
        """SetupError, in one line, when they cannot run cells into ``sweep_dir``; writes
        nothing there."""

    def run(self, cells: Sequence[tuple[Cell, CellState]], sweep_dir: Path,
            ended: Callable[[CellState, float], None]) -> None:
        """Run each cell into its ``run_dir`` (none exists), recording how it ended in its
        state, then call ``ended(state, seconds it took)``. KeyboardInterrupt: stop every
        cell and propagate."""


@dataclass(frozen=True, slots=True)
class Ending:
    """How one run of a cell ended: ``done`` with results.json's verdict, or ``failed``
    with one line saying why."""

    status: Status
    valid: Valid | None = None
    error: str | None = None


def disk_needed(cells: Sequence[Cell], analyzed: Sequence[Cell] = ()) -> int:
    """Bytes the run directories of ``cells`` and the analysis tables of ``analyzed`` will
    take, at most: each cell's main-phase seconds x (:data:`RUN_BYTES_PER_S` + its sends
    per second x :data:`HISTORY_BYTES_PER_SEND`), and :data:`ANALYSIS_BYTES_PER_LINE` per
    :func:`history_lines` of ``analyzed``."""
    runs = sum(c.spec.time_limit_s * (RUN_BYTES_PER_S + _sends_per_s(c.spec) * HISTORY_BYTES_PER_SEND)
               for c in cells)
    return int(runs + history_lines(analyzed) * ANALYSIS_BYTES_PER_LINE)


def duration_s(cells: Sequence[Cell], overhead_s: float = CELL_OVERHEAD_S) -> float:
    """Seconds ``cells`` take one after another, about: each one's main phase plus ``overhead_s``."""
    return sum(c.spec.time_limit_s + overhead_s for c in cells)


def analysis_s(cells: Sequence[Cell], cores: int) -> float:
    """Seconds the analysis of ``cells``' runs takes on ``cores`` cores, about: their
    :func:`history_lines` (at most) at :data:`ANALYSIS_LINES_PER_CORE_S` each core."""
    return history_lines(cells) / (ANALYSIS_LINES_PER_CORE_S * max(1, cores))


def history_lines(cells: Sequence[Cell]) -> float:
    """History lines ``cells``' runs write, about: :data:`HISTORY_LINES_PER_SEND` a send, at
    each one's sends per second."""
    return sum(c.spec.time_limit_s * _sends_per_s(c.spec) * HISTORY_LINES_PER_SEND for c in cells)


def _sends_per_s(spec: TestSpec) -> float:
    rate = spec.workload.rate
    return min(rate, FULL_SPEED_SENDS_PER_S) if rate > 0 else FULL_SPEED_SENDS_PER_S


def check_disk(sweep_dir: Path, cells: Sequence[Cell], analyzed: Sequence[Cell]) -> None:
    """Raise SetupError, with the figures, when :func:`disk_needed` by ``cells`` and the
    analysis of ``analyzed`` (every cell of the sweep) would not fit on ``sweep_dir``'s disk."""
    need = disk_needed(cells, analyzed)
    where = sweep_dir
    while not where.exists():
        where = where.parent
    free = shutil.disk_usage(where).free
    if need > free:
        raise SetupError(f"the sweep needs about {size(need)} for {len(cells)} cell(s) and the "
                         f"analysis of {len(analyzed)} "
                         f"({HISTORY_BYTES_PER_SEND} B per send and {RUN_BYTES_PER_S // 1000} kB per second "
                         f"of run, {ANALYSIS_BYTES_PER_LINE} B of tables per history line) but {where} "
                         f"has {size(free)} free; free some space, lower workload.rate, "
                         f"or choose another --out")


def size(n: float) -> str:
    """Bytes for a person: GB with one decimal, MB below 1 GB."""
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def prepare(matrix: Matrix, sweep_dir: Path, night: str | None = None) -> Manifest:
    """The manifest to run from: a new sweep directory, or the one a rerun resumes; a
    nightly's gives its ``night``. A directory holding the sweep of another matrix is
    refused (SpecError)."""
    copy = sweep_dir / MATRIX_FILE
    if copy.exists():
        try:
            before = read_yaml_mapping(copy, "the matrix of a sweep")
        except SpecError as e:
            raise SpecError(f"{e}; choose another --out") from None
        if before != matrix.data:
            raise SpecError(f"{sweep_dir} holds the sweep of another matrix ({copy} differs); "
                            f"choose another --out")
    return plan(matrix, load(sweep_dir), sweep_dir, night)


def run_sweep(matrix: Matrix, sweep_dir: Path, manifest: Manifest, *, console: Console,
              run_cell: RunCell | None = None, workers: Workers | None = None) -> Manifest:
    """Run every cell of ``manifest`` that is not done; returns the manifest at the end.

    Contract as the module docstring says; ``manifest`` is :func:`prepare`'s, and is
    updated in place and saved after every change. ``run_cell`` runs one cell here
    (default :func:`run_isolated`); ``workers``, when given, run them all instead.
    """
    run_cell = run_cell or run_isolated
    sweep_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(sweep_dir / MATRIX_FILE, yaml.safe_dump(dict(matrix.data), sort_keys=False).encode())
    manifest.save(sweep_dir)
    specs = {c.id: c for c in matrix.cells}
    todo = [s for s in manifest.cells if s.status != "done"]
    with _Progress(console, manifest, specs, workers.slots if workers else 1) as progress:
        if workers is None:
            for state in todo:
                progress.start(state)
                _run_one(specs[state.id], state, sweep_dir, manifest, run_cell)
                progress.end(state)
        else:
            for state in todo:
                _clear(sweep_dir / state.run_dir)

            def ended(state: CellState, seconds: float) -> None:
                manifest.save(sweep_dir)
                progress.end(state, seconds)

            workers.run([(specs[s.id], s) for s in todo], sweep_dir, ended)
    return manifest


def _clear(run_dir: Path) -> None:
    if run_dir.exists():  # left by a failed, interrupted or crashed attempt
        shutil.rmtree(run_dir)


def _run_one(cell: Cell, state: CellState, sweep_dir: Path, manifest: Manifest,
             run_cell: RunCell) -> None:
    _clear(sweep_dir / state.run_dir)
    state.status, state.valid, state.error, state.ran_on = "running", None, None, None
    state.started, state.ended = utc_now(), None
    manifest.save(sweep_dir)
    try:
        ending = run_once(cell.spec, sweep_dir / state.run_dir, run_cell)
    except KeyboardInterrupt:
        record(state, Ending("failed", error="interrupted"))
        manifest.save(sweep_dir)
        raise
    record(state, ending)
    manifest.save(sweep_dir)


def run_once(spec: TestSpec, run_dir: Path, run_cell: RunCell) -> Ending:
    """Run ``spec`` into ``run_dir`` (which must not exist) with ``run_cell``, and how it
    ended; KeyboardInterrupt propagates."""
    try:
        outcome = run_cell(spec, console=Console(file=io.StringIO()), run_dir=run_dir)
    except Exception as e:  # a cell's error, whatever it is, must not end the sweep
        return Ending("failed", error=one_line(f"{type(e).__name__}: {e}"))
    if outcome.error is not None:
        return Ending("failed", error=one_line(outcome.error))
    valid, why = _stored_verdict(run_dir / RESULTS_FILE)
    return Ending("failed", error=why) if why else Ending("done", valid)


def record(state: CellState, ending: Ending, ended: str | None = None) -> None:
    """Put ``ending`` into ``state``, which ended at ``ended`` (a UTC time; default now)."""
    state.status, state.valid, state.error = ending.status, ending.valid, ending.error
    state.ended = ended or utc_now()


def run_isolated(spec: TestSpec, *, console: Console | None = None, run_dir: Path | None = None,
                 target: Callable[[TestSpec, Path, multiprocessing.Queue[str | None]], None] | None = None,
                 ) -> RunOutcome:
    """Run ``spec`` into ``run_dir`` with :func:`~faultline.run.runner.run_test` in a new
    process (``target``, default :func:`run_in_child`), and return what the
    sweep needs of the outcome: its ``error``, or why the process ended without one.

    The process is spawned, not forked (the parent has threads). Ctrl-C reaches it too
    (same process group): it tears its cluster down and ends; the parent waits for that
    (at most :data:`INTERRUPT_GRACE_S`), then raises KeyboardInterrupt. A process that
    dies leaves its cluster to the next cluster start, which removes the leftovers of
    runs whose owner is dead.
    """
    assert run_dir is not None
    ctx = multiprocessing.get_context("spawn")
    errors: multiprocessing.Queue[str | None] = ctx.Queue()
    child = ctx.Process(target=target or run_in_child, args=(spec, run_dir, errors),
                        name=f"faultline-cell-{run_dir.name}")
    child.start()
    try:
        child.join()
    except KeyboardInterrupt:
        child.join(INTERRUPT_GRACE_S)
        if child.is_alive():
            child.kill()
            child.join()
        raise
    try:
        error = errors.get(timeout=1.0)
    except Exception:  # queue.Empty: it died before it could say
        code = child.exitcode or 0
        error = (f"the run's process died of signal {signal.Signals(-code).name}" if code < 0
                 else f"the run's process exited with code {code}")
    return RunOutcome(run_dir, None, WorkloadStats(), error=error)


def run_in_child(spec: TestSpec, run_dir: Path, errors: multiprocessing.Queue[str | None]) -> None:
    """The cell's process: run_test, then the outcome's error (or None) on ``errors``."""
    try:
        outcome = run_test(spec, console=Console(file=io.StringIO()), run_dir=run_dir)
    except KeyboardInterrupt:  # torn down by run_test; the parent records the interruption
        return
    except Exception as e:  # a bug, but the cell's: the sweep records it and goes on
        errors.put(" ".join(f"{type(e).__name__}: {e}".split()))
        return
    errors.put(outcome.error)


def _stored_verdict(path: Path) -> tuple[Valid | None, str | None]:
    """results.json's ``valid`` (true, false or "unknown") and None, or None and a line
    saying why there is none."""
    try:
        valid = orjson.loads(path.read_bytes()).get("valid")
    except FileNotFoundError:
        return None, f"the run left no {RESULTS_FILE}"
    except (OSError, orjson.JSONDecodeError, AttributeError) as e:
        return None, one_line(f"{path.name} unreadable: {e}")
    if valid is True or valid is False or valid == "unknown":
        return valid, None
    return None, f"{path.name} has no verdict (valid: {valid!r})"


def one_line(text: str) -> str:
    """``text`` on one line (its whitespace runs made one space), cut to 500 characters."""
    return " ".join(text.split())[:500]


class _Progress(LiveLine):
    """The live sweep line: cells done / failed / left, elapsed, estimated time left, and
    the cell running here (``slots`` cells at once run elsewhere: no cell is shown). On a
    terminal one rich live line; elsewhere a line per cell."""

    def __init__(self, console: Console, manifest: Manifest, cells: dict[str, Cell],
                 slots: int = 1) -> None:
        super().__init__(console, refresh_per_second=2)
        self._manifest = manifest
        self._cells = cells
        self._slots = slots
        self._t0 = time.monotonic()
        self._cell_t0 = self._t0
        self._current: CellState | None = None
        self._overheads: list[float] = []  # seconds each cell took beyond its main phase

    def start(self, state: CellState) -> None:
        self._current, self._cell_t0 = state, time.monotonic()
        if self._live is None:
            self._console.print(self._render(), highlight=False)

    def end(self, state: CellState, took: float | None = None) -> None:
        """``state`` ended, ``took`` seconds after it started (default: since :meth:`start`)."""
        took = time.monotonic() - self._cell_t0 if took is None else took
        self._overheads.append(max(0.0, took - self._cells[state.id].spec.time_limit_s))
        verdict = state.error if state.status == "failed" else f"valid: {state.valid}"
        line = f"cell {state.id}: {state.status} in {took:.0f} s ({verdict})"
        if self._live is not None:
            self._live.console.print(line, highlight=False)
        else:
            self._console.print(line, highlight=False)
        self._current = None

    def eta_s(self) -> float:
        """Seconds left: every cell not done or failed (the running one counted by what
        is left of it) at its main phase plus the mean measured overhead, over the slots."""
        overhead = sum(self._overheads) / len(self._overheads) if self._overheads else CELL_OVERHEAD_S
        todo = [self._cells[c.id] for c in self._manifest.cells if c.status in ("pending", "running")]
        left = duration_s(todo, overhead)
        if self._current is not None:
            left -= min(time.monotonic() - self._cell_t0,
                        self._cells[self._current.id].spec.time_limit_s + overhead)
        return max(0.0, left / self._slots)

    def _render(self) -> Text:
        m = self._manifest
        left = m.count("pending") + m.count("running")
        t = Text()
        t.append(f"sweep {m.name} ", style="bold")
        t.append(f"done {m.count('done')}", style="green")
        t.append(" ")
        t.append(f"failed {m.count('failed')}", style="red" if m.count("failed") else "")
        t.append(f" left {left}  elapsed {hms(time.monotonic() - self._t0)}"
                 f"  ETA {hms(self.eta_s())}")
        if self._current is not None:
            t.append(f"  running {self._current.id} ({time.monotonic() - self._cell_t0:.0f} s)")
        return t


def hms(seconds: float) -> str:
    """``H:MM:SS``."""
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def run_matrix(matrix: Matrix, sweep_dir: Path, console: Console, night: str | None = None,
               workers: Workers | None = None) -> Manifest:
    """The whole of a sweep, for ``faultline sweep`` and ``faultline nightly`` (which names
    its ``night``): prepare (or resume) ``sweep_dir``, resolve every Kafka version the
    cells left need (``workers``: check they can run cells into ``sweep_dir`` instead;
    each resolves its versions), refuse when the disk would not hold them (SetupError),
    and run them. Ctrl-C exits 2 after saying which cells are kept. Returns the manifest
    as saved."""
    manifest = prepare(matrix, sweep_dir, night)
    done = {s.id for s in manifest.cells if s.status == "done"}
    todo = [c for c in matrix.cells if c.id not in done]
    if workers is not None:
        workers.check(sweep_dir)
    else:
        for version in sorted({(c.spec.kafka.version, c.spec.kafka.home) for c in todo},
                              key=lambda v: v[0]):
            kafka_dist.ensure_kafka(*version, report=lambda line: console.print(line, highlight=False))
    check_disk(sweep_dir, todo, matrix.cells)
    need = disk_needed(todo, matrix.cells)
    console.print(f"sweep {matrix.name}: {len(matrix.cells)} cells, {len(todo)} to run "
                  f"(about {size(need)} and {hms(duration_s(todo))}, then the analysis "
                  f"of every run about {hms(analysis_s(matrix.cells, os.cpu_count() or 1))} here) "
                  f"into {sweep_dir}", highlight=False)
    try:
        return run_sweep(matrix, sweep_dir, manifest, console=console, workers=workers)
    except KeyboardInterrupt:
        click.echo(f"faultline: interrupted; {manifest.count('done')} cell(s) done are kept "
                   f"in {sweep_dir}; run the same command again to go on", err=True)
        sys.exit(2)
