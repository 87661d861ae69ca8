"""A local multi-node cluster of one version (``DevCluster``), for multi-node and fault tests."""

from __future__ import annotations

import time
from pathlib import Path

from osrag.devnode import process as proc
from osrag.devnode.base import ClusterStatus, LauncherBase, NodeStatus
from osrag.devnode.plan import NodeSpec, opensearch_yml, plan_cluster
from osrag.errors import LauncherError
from osrag.settings import Settings


class DevCluster(LauncherBase):
    """n local nodes of one version forming one cluster, for multi-node and fault tests."""

    def __init__(
        self, settings: Settings, log: proc.Log | None = None, *, version: str | None = None, nodes: int = 3
    ) -> None:
        super().__init__(settings, log, version)
        heap = settings.dev_heap if "dev_heap" in settings.model_fields_set else None
        self.specs = plan_cluster(self.home, self.version, nodes, **({"heap": heap} if heap else {}))

    def _any_spec(self) -> NodeSpec:
        return self.specs[0]

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.specs]

    def spec(self, n: int) -> NodeSpec:
        if not 1 <= n <= len(self.specs):
            raise LauncherError(f"node {n} does not exist; the cluster has nodes 1..{len(self.specs)}")
        return self.specs[n - 1]

    def client_settings(self, node: int = 1, **overrides: object) -> Settings:
        """``Settings`` pointing at node ``node`` (1-based); stop a different one in fault tests."""
        return self.s.model_copy(update={"url": self.spec(node).url, **overrides})

    def install(self) -> Path:
        return self._install(False, self.specs[0].install_dir)

    def up(self, wait_s: float = 300.0) -> ClusterStatus:
        """Start every node not already running; wait until all have joined and nothing is red."""
        down = [s for s in self.specs if proc.read_pid(s.pid_file) is None]
        busy = [s for s in down if proc.http_get(f"{s.url}/")[0] is not None]
        if busy:
            raise LauncherError(
                f"port(s) {', '.join(str(s.http_port) for s in busy)} already answer but were not started "
                "by this launcher; stop what runs there"
            )
        if down:
            self.install()
            t0 = time.monotonic()
            self._start(down, [opensearch_yml(s) for s in down])  # returns once each JVM has started
            st = self._wait_joined(len(self.specs), time.monotonic() + wait_s)
            self._log(f"{len(self.specs)} nodes joined, {st.health}, after {time.monotonic() - t0:.0f}s")
            return st
        return self.status()

    def _wait_joined(self, expected: int, deadline: float) -> ClusterStatus:
        while time.monotonic() < deadline:
            st = self.status()
            if st.number_of_nodes == expected and st.health in ("green", "yellow"):
                return st
            for s in self.specs:
                if proc.exited(s.pid_file):
                    raise LauncherError(f"{s.name} exited during start-up; see {s.logs_dir}")
            time.sleep(1.0)
        raise LauncherError(
            f"the cluster did not reach {expected} nodes in time; see {self.specs[0].logs_dir}"
        )

    def down(self, wait_s: float = 60.0) -> list[int]:
        """Stop exactly the nodes this launcher started; their numbers."""
        return [i + 1 for i, s in enumerate(self.specs) if proc.stop(s.pid_file, wait_s)]

    def stop_node(self, n: int, wait_s: float = 60.0) -> bool:
        return proc.stop(self.spec(n).pid_file, wait_s)

    def start_node(self, n: int, wait_s: float = 240.0) -> ClusterStatus:
        """Start one stopped node and wait until the cluster has all its nodes again."""
        spec = self.spec(n)
        if proc.read_pid(spec.pid_file) is not None:
            return self.status()
        t0 = time.monotonic()
        self._start([spec], [opensearch_yml(spec)])
        st = self._wait_joined(len(self.specs), time.monotonic() + wait_s)
        self._log(f"{spec.name} rejoined after {time.monotonic() - t0:.0f}s ({st.health})")
        return st

    def status(self) -> ClusterStatus:
        nodes = []
        health: dict[str, object] = {}
        for s in self.specs:
            pid = proc.read_pid(s.pid_file)
            _, info = proc.http_get(f"{s.url}/")
            if not isinstance(info, dict):
                nodes.append(
                    NodeStatus(s.url, False, pid is not None, pid, detail="not answering", name=s.name)
                )
                continue
            _, h = proc.http_get(f"{s.url}/_cluster/health?timeout=2s")
            if isinstance(h, dict) and not health:
                health = h
            nodes.append(
                NodeStatus(
                    s.url,
                    True,
                    pid is not None,
                    pid,
                    version=info.get("version", {}).get("number"),
                    health=(h or {}).get("status") if isinstance(h, dict) else None,
                    name=s.name,
                )
            )
        return ClusterStatus(
            cluster_name=self.specs[0].cluster_name,
            health=health.get("status"),  # type: ignore[arg-type]
            number_of_nodes=int(health.get("number_of_nodes", 0)),  # type: ignore[arg-type]
            nodes=tuple(nodes),
        )
