"""stop / start: a graceful stop (SIGTERM, controlled shutdown), later a start.

Controlled shutdown asks the controller to move leadership off the node before it
exits, so a graceful stop should move leaders cleanly with no unavailability beyond
the move itself; it is the control case against ``kill``.
"""

from __future__ import annotations

from typing import Any

from faultline.nemeses.base import NodeFault, stoppable

#: Seconds a controlled shutdown may take before the backend escalates to SIGKILL.
STOP_TIMEOUT_S = 30.0


class StopNemesis(NodeFault):
    """``stop`` stops one node gracefully (``value.nodes``); ``start`` starts it again."""

    family = "stop"

    def _fault(self, node: int) -> dict[str, Any]:
        if stoppable(self.cluster, self.family).stop_node(node, STOP_TIMEOUT_S):
            return {"result": f"node {node} did not stop within {STOP_TIMEOUT_S:.0f} s: killed",
                    "killed": [node]}
        return {"result": f"stopped node {node}"}
