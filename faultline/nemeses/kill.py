"""kill / start: SIGKILL a node's JVM, later start it again with its data intact.

What it should provoke: leader failover, ISR shrink, recovery of the killed replica
(log recovery from its recovery point, truncation by leader epoch) when it returns.
"""

from __future__ import annotations

from typing import Any

from faultline.nemeses.base import NodeFault, killable


class KillNemesis(NodeFault):
    """``kill`` SIGKILLs one node (``value.nodes``); ``start`` starts it again.

    ``start`` returns once the process runs, not once the node has rejoined the ISR.
    """

    family = "kill"

    def _fault(self, node: int) -> dict[str, Any]:
        killable(self.cluster, self.family).kill(node)
        return {"result": f"killed node {node}"}
