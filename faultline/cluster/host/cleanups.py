"""What a backend alone can find of a run, removed whenever a run is destroyed.

A backend registers its clean-up when its module loads (the docker backend: a run's
containers and network, which no namespace or link name shows);
:func:`faultline.cluster.host.runstate.destroy` calls every one. :mod:`faultline.cluster.backends` loads
every backend, so whatever destroys runs (a run's start, ``faultline cluster down``)
imports it first.
"""

from __future__ import annotations

from collections.abc import Callable

_REGISTERED: list[Callable[[str], None]] = []


def register(clean_up: Callable[[str], None]) -> None:
    """Have :func:`clean_up_run` call ``clean_up(run_id)``; registering it again adds nothing.
    ``clean_up`` must not raise for a run it has nothing of."""
    if clean_up not in _REGISTERED:
        _REGISTERED.append(clean_up)


def registered() -> tuple[Callable[[str], None], ...]:
    """The clean-ups registered so far, in order."""
    return tuple(_REGISTERED)


def clean_up_run(run_id: str) -> None:
    """Call every registered clean-up for ``run_id``, in the order registered."""
    for clean_up in registered():
        clean_up(run_id)
