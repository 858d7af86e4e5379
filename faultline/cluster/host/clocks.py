"""Brokers' wall clocks set apart through libfaketime, while every namespace shares the
kernel's one clock.

A broker JVM of a run with clock faults starts with libfaketime preloaded
(:func:`environment`): its ``System.currentTimeMillis`` (and every other wall-clock read)
is the kernel's time plus the offset written in the node's offset file, which libfaketime
reads again each :data:`REREAD_S` seconds, so a running JVM changes time without a
restart. ``System.nanoTime`` stays true (``FAKETIME_DONT_FAKE_MONOTONIC``): timeouts
Kafka measures on the monotonic clock are untouched. A run without clock faults starts
its JVMs as before, with no preload.

The offset files live in the run's root-only state directory (``clocks/n<id>/offset``, a
directory per node, which a container can mount alone and still see each new file), written
whole through a temporary file renamed over them (:func:`faultline.rundir.write_atomic`:
never a link followed, never half a file read), and go with the directory at teardown.
"""

from __future__ import annotations

import glob
from pathlib import Path

from faultline.errors import ClusterError
from faultline.rundir import write_atomic

#: Where Debian's ``libfaketime`` package puts the library, per architecture.
LIBRARY_GLOB = "/usr/lib/*-linux-gnu/faketime/libfaketime.so.1"
#: The Debian package that provides it (``faultline setup`` installs it).
PACKAGE = "libfaketime"
#: How often a JVM reads its offset file again, in seconds: an offset written takes
#: effect within this long.
REREAD_S = 1


def library() -> Path | None:
    """The installed libfaketime, or None."""
    found = sorted(glob.glob(LIBRARY_GLOB))
    return Path(found[0]) if found else None


def required_library() -> Path:
    """The installed libfaketime; ClusterError saying how to install it when it is not."""
    lib = library()
    if lib is None:
        raise ClusterError(f"clock faults need libfaketime ({LIBRARY_GLOB} not found): "
                           f"faultline setup, or apt-get install -y {PACKAGE}")
    return lib


def offset_file(state_dir: Path, node: int) -> Path:
    """Node ``node``'s offset file in a run's state directory (not made here)."""
    return state_dir / "clocks" / f"n{node}" / "offset"


def environment(lib: Path, offsets: Path) -> dict[str, str]:
    """The variables that start a JVM on libfaketime, its wall clock offset by what
    ``offsets`` says, its monotonic clock true."""
    # FORCE_MONOTONIC_FIX=0: with the fix a JVM's timed waits return at once and its
    # service threads spin (Debian's 0.9.10 with Java 17: a broker never gets registered)
    return {"LD_PRELOAD": str(lib), "FAKETIME_TIMESTAMP_FILE": str(offsets),
            "FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_FORCE_MONOTONIC_FIX": "0",
            "FAKETIME_CACHE_DURATION": str(REREAD_S)}


def offset_text(seconds: int) -> str:
    """libfaketime's spelling of a relative offset: ``+300``, ``-120``, ``+0``."""
    return f"{seconds:+d}"


def write_offset(path: Path, seconds: int) -> None:
    """Set the clock that reads ``path`` ``seconds`` from the kernel's (its directories
    are made, mode 0700, if missing)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(path, (offset_text(seconds) + "\n").encode())
