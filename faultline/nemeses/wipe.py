"""wipe: kill a node, delete its partition data, later start it: a replica that comes
back empty.

The node's KRaft metadata stays (``Wipeable.wipe``), so it rejoins as the same node
id and refills its replicas from the leaders. What it should provoke: nothing, while
another in-sync replica holds every committed record; lost writes once data is lost
on ``min.insync.replicas`` replicas (docs/design.md's guarantee table).
"""

from __future__ import annotations

from typing import Any

from faultline.nemeses.base import NodeFault, killable, wipeable


class WipeNemesis(NodeFault):
    """``wipe`` kills one node (``value.nodes``) and deletes its partition logs; the
    node stays down until ``start``."""

    family = "wipe"
    needs_running = False

    def _fault(self, node: int) -> dict[str, Any]:
        killable(self.cluster, self.family).kill(node)
        wipeable(self.cluster, self.family).wipe(node)
        return {"result": f"killed node {node} and deleted its partition data"}
