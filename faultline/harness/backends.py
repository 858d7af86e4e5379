"""Cluster backends by the name a spec gives (``spec.backend``).

:func:`cluster_for` is how the runner gets its cluster; a backend the spec names but
this installation does not have is one clear SpecError, before anything starts. Each
backend's module is imported only when it is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import cast

from faultline.errors import SpecError
from faultline.harness.cluster import Cluster
from faultline.spec import TestSpec

#: backend name -> "module:class" of its :class:`~faultline.harness.cluster.Cluster`.
BACKENDS: Mapping[str, str] = {
    "local": "faultline.harness.local:LocalCluster",
}


def cluster_for(spec: TestSpec) -> Callable[[TestSpec], Cluster]:
    """The cluster class of ``spec.backend``, called with the spec to make the (not yet
    started) cluster; SpecError naming the backends there are when it is not one."""
    target = BACKENDS.get(spec.backend)
    if target is None:
        raise SpecError(f"backend {spec.backend!r} is not available; backends: {', '.join(BACKENDS)}")
    module, name = target.split(":")
    return cast(Callable[[TestSpec], Cluster], getattr(importlib.import_module(module), name))
