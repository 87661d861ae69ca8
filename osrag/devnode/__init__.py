"""Local OpenSearch nodes and clusters for development, tests and CI (no Docker).

``DevNode`` runs one node of a version, plain or secured; ``DevCluster`` runs a
local multi-node cluster. See ``plan`` for the layout and port plan.
"""

from osrag.devnode.base import ClusterStatus, NodeStatus
from osrag.devnode.cluster import DevCluster
from osrag.devnode.launcher import DevNode

__all__ = ["ClusterStatus", "DevCluster", "DevNode", "NodeStatus"]
