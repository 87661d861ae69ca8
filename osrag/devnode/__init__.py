"""Local OpenSearch nodes and clusters for development, tests and CI (no Docker).

``DevNode`` runs one node of a version, plain or secured; ``DevCluster`` runs a
local multi-node cluster. See ``plan`` for the layout and port plan.
"""

from osrag.devnode.base import ClusterStatus, NodeStatus
from osrag.devnode.cluster import DevCluster
from osrag.devnode.launcher import DevNode
from osrag.devnode.plan import REQUIRED_PLUGINS, Artifact, artifacts
from osrag.devnode.process import NODE_USER, _java_major, _last_error_line

__all__ = [
    "NODE_USER",
    "REQUIRED_PLUGINS",
    "Artifact",
    "ClusterStatus",
    "DevCluster",
    "DevNode",
    "NodeStatus",
    "_java_major",
    "_last_error_line",
    "artifacts",
]
