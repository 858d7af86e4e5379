"""pause / resume: SIGSTOP a node's JVM, later SIGCONT it.

A paused broker keeps its sockets and its leadership claims but answers nothing: its
followers' fetches stall (it drops out of other leaders' ISRs after
``replica.lag.time.max.ms``), and a paused leader is a zombie until the controller
fences it (``broker.session.timeout.ms``).
"""

from __future__ import annotations

from typing import Any

from faultline.nemeses.base import NodeFault, pausable


class PauseNemesis(NodeFault):
    """``pause`` SIGSTOPs one node (``value.nodes``); ``resume`` SIGCONTs it."""

    family = "pause"
    leaves_down = False

    def _fault(self, node: int) -> dict[str, Any]:
        pausable(self.cluster, self.family).pause(node)
        return {"result": f"paused node {node}"}

    def _heal(self, node: int) -> None:
        pausable(self.cluster, self.family).resume(node)
