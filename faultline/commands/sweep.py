"""``faultline sweep MATRIX.yaml [--out DIR]``: run every cell of a matrix into one sweep
directory; a rerun into the same directory skips the cells already done.

Everything is checked before the first run: the matrix (one line naming the file,
the cell and the field; exit 2), every Kafka version it names (resolved now, so a
version Maven Central lacks fails before an hour of runs), and the disk. Exit code
0: every cell done and valid; 1: some cell invalid; 2: some cell failed, unknown or
not run (Ctrl-C).

``--master spark://HOST:PORT`` runs the cells on that Spark standalone cluster's workers, one
cell per worker at a time (:mod:`faultline.sweep.spark_cells`), into a sweep directory on a
filesystem every worker mounts at the same path. A master that does not answer, or workers
that cannot run cells into the directory, are one line and exit 2, with nothing written.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from faultline.analysis.spark import session
from faultline.sweep.matrix import load_matrix
from faultline.sweep.runner import run_matrix
from faultline.sweep.spark_cells import SparkCells, master_addresses


@click.command("sweep")
@click.argument("matrix_file", metavar="MATRIX.yaml",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path),
              help="The sweep directory.  [default: results/sweeps/<matrix name>]")
@click.option("--master", default=None, metavar="spark://HOST:PORT",
              help="run the cells on this Spark standalone cluster's workers [default: here, "
                   "one after another]")
def sweep(matrix_file: Path, out: Path | None, master: str | None) -> None:
    """Run the cross product of a matrix's axes (and its explicit cells), each cell a
    normal run directory under one sweep directory with a sweep.json manifest."""
    if master is not None:
        master_addresses(master)  # a bad URL: before the matrix is read
    matrix = load_matrix(matrix_file)
    sweep_dir = out if out is not None else Path("results") / "sweeps" / matrix.name
    workers = SparkCells.connect(master, session) if master is not None else None
    manifest = run_matrix(matrix, sweep_dir, Console(stderr=True), workers=workers)
    click.echo(f"sweep:   {sweep_dir}")
    click.echo(f"cells:   done {manifest.count('done')}  failed {manifest.count('failed')}")
    for state in manifest.cells:
        click.echo(f"  {state.id}: {state.status}"
                   + (f" ({state.error})" if state.error else f", valid {state.valid}"))
    sys.exit(manifest.exit_code)
