"""Cluster backends by the name a spec gives (``spec.backend``).

:func:`cluster_for` is how the runner gets its cluster; a backend the spec names but
this installation does not have is one clear SpecError, before anything starts.
Importing this module loads every backend, so each has registered its clean-up
(:mod:`.host.cleanups`) before any run is destroyed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from faultline.cluster.docker.cluster import DockerCluster
from faultline.cluster.local.cluster import LocalCluster
from faultline.cluster.protocol import Cluster
from faultline.errors import SpecError
from faultline.spec import TestSpec

#: backend name -> its cluster class, made as ``cls(spec)`` (not yet started).
BACKENDS: Mapping[str, Callable[[TestSpec], Cluster]] = {
    "local": LocalCluster,
    "docker": DockerCluster,
}


def cluster_for(spec: TestSpec) -> Callable[[TestSpec], Cluster]:
    """The cluster class of ``spec.backend``; SpecError naming the backends there are
    when it is not one."""
    make = BACKENDS.get(spec.backend)
    if make is None:
        raise SpecError(f"backend {spec.backend!r} is not available; backends: {', '.join(BACKENDS)}")
    return make
