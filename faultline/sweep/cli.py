"""``faultline sweep MATRIX.yaml [--out DIR]``: run every cell of a matrix into one sweep
directory; a rerun into the same directory skips the cells already done.

Everything is checked before the first run: the matrix (one line naming the file,
the cell and the field; exit 2), every Kafka version it names (resolved now, so a
version Maven Central lacks fails before an hour of runs), and the disk. Exit code
0: every cell done and valid; 1: some cell invalid; 2: some cell failed, unknown or
not run (Ctrl-C).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from faultline.cluster import kafka_dist
from faultline.sweep.manifest import Manifest
from faultline.sweep.matrix import Matrix, load_matrix
from faultline.sweep.runner import check_disk, disk_needed, duration_s, hms, prepare, run_sweep, size


@click.command("sweep")
@click.argument("matrix_file", metavar="MATRIX.yaml",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path),
              help="The sweep directory.  [default: results/sweeps/<matrix name>]")
def sweep(matrix_file: Path, out: Path | None) -> None:
    """Run the cross product of a matrix's axes (and its explicit cells), each cell a
    normal run directory under one sweep directory with a sweep.json manifest."""
    matrix = load_matrix(matrix_file)
    sweep_dir = out if out is not None else Path("results") / "sweeps" / matrix.name
    manifest = run_matrix(matrix, sweep_dir, Console(stderr=True))
    click.echo(f"sweep:   {sweep_dir}")
    click.echo(f"cells:   done {manifest.count('done')}  failed {manifest.count('failed')}")
    for state in manifest.cells:
        click.echo(f"  {state.id}: {state.status}"
                   + (f" ({state.error})" if state.error else f", valid {state.valid}"))
    sys.exit(manifest.exit_code)


def run_matrix(matrix: Matrix, sweep_dir: Path, console: Console, night: str | None = None) -> Manifest:
    """The whole of a sweep, for ``faultline sweep`` and ``faultline nightly`` (which names
    its ``night``): prepare (or resume) ``sweep_dir``, resolve every Kafka version the
    cells left need, refuse when the disk would not hold them (SetupError), and run them.
    Ctrl-C exits 2 after saying which cells are kept. Returns the manifest as saved."""
    manifest = prepare(matrix, sweep_dir, night)
    done = {s.id for s in manifest.cells if s.status == "done"}
    todo = [c for c in matrix.cells if c.id not in done]
    for version in sorted({(c.spec.kafka.version, c.spec.kafka.home) for c in todo},
                          key=lambda v: v[0]):
        kafka_dist.ensure_kafka(*version, report=lambda line: console.print(line, highlight=False))
    check_disk(sweep_dir, todo)
    console.print(f"sweep {matrix.name}: {len(matrix.cells)} cells, {len(todo)} to run "
                  f"(about {size(disk_needed(todo))} and {hms(duration_s(todo))}) into {sweep_dir}",
                  highlight=False)
    try:
        return run_sweep(matrix, sweep_dir, manifest, console=console)
    except KeyboardInterrupt:
        click.echo(f"faultline: interrupted; {manifest.count('done')} cell(s) done are kept "
                   f"in {sweep_dir}; run the same command again to go on", err=True)
        sys.exit(2)
