"""What every local launcher shares: the status records it reports, settings, the Maven repo, the JDK,
install and start. ``launcher.DevNode`` (one node) and ``cluster.DevCluster`` (n nodes) build on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from osrag.devnode import process as proc
from osrag.devnode.plan import NodeSpec, artifacts, missing_modules
from osrag.settings import Settings


@dataclass(frozen=True)
class NodeStatus:
    url: str
    running: bool
    started_by_osrag: bool
    pid: int | None
    version: str | None = None
    health: str | None = None
    plugins: tuple[str, ...] = ()
    detail: str = ""
    name: str = ""
    ca_certs: str | None = None  # secured node only: where the CA is, who the admin is
    user: str | None = None
    password_file: str | None = None
    #: (engine, "yes"/"no"): which k-NN engines this install can serve (native libraries present)
    engines: tuple[tuple[str, str], ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "engines": dict(self.engines),
            "name": self.name,
            "url": self.url,
            "running": self.running,
            "started_by_osrag": self.started_by_osrag,
            "pid": self.pid,
            "version": self.version,
            "health": self.health,
            "plugins": list(self.plugins),
            "detail": self.detail,
            "ca_certs": self.ca_certs,
            "user": self.user,
            "password_file": self.password_file,
        }


@dataclass(frozen=True)
class ClusterStatus:
    cluster_name: str
    health: str | None
    number_of_nodes: int
    nodes: tuple[NodeStatus, ...] = field(default_factory=tuple)

    @property
    def running(self) -> bool:
        return any(n.running for n in self.nodes)

    def as_dict(self) -> dict[str, object]:
        return {
            "cluster_name": self.cluster_name,
            "health": self.health,
            "number_of_nodes": self.number_of_nodes,
            "nodes": [n.as_dict() for n in self.nodes],
        }


class LauncherBase:
    """What a node and a cluster share: settings, the Maven repo, the JDK, install."""

    def __init__(self, settings: Settings, log: proc.Log | None, version: str | None) -> None:
        self.s = settings
        self.home = Path(settings.dev_home)
        self.version = version or settings.dev_opensearch_version
        self._log = log or (lambda msg: None)

    @property
    def m2(self) -> Path:
        return self.home / "m2"

    def java_home(self) -> Path:
        return proc.java_home_for(self.version, self.s.dev_java_home)

    def _install(self, security: bool, target: Path) -> Path:
        if (target / ".osrag-installed").exists():
            return target
        arts = artifacts(self.version, security)
        jh = self.java_home()
        env = dict(proc.node_env(jh, self._any_spec()))
        env.pop("OPENSEARCH_PATH_CONF")  # the plugin tool writes the install's own config dir
        return proc.install(target, arts, missing_modules(self.version), self.m2, jh, env, self._log)

    def _any_spec(self) -> NodeSpec:
        raise NotImplementedError

    def _place_ml_natives(self, spec: NodeSpec) -> None:
        """libtorch for ml-commons' local models, from Maven Central, unless already in the data dir
        (osrag.devnode.mlnatives says why). A fetch that fails costs local models only: logged, not fatal."""
        from osrag.devnode import mlnatives
        from osrag.errors import LauncherError

        natives = mlnatives.wanted(spec.install_dir)
        if natives is None or natives.placed(spec.data_dir):
            return
        try:
            files = proc.fetch([natives.native, natives.jni], self.m2, self.java_home(), self._log)
            mlnatives.lay_out(
                natives, files[natives.native.coordinate], files[natives.jni.coordinate], spec.data_dir
            )
        except (LauncherError, OSError, KeyError) as exc:
            self._log(f"ml-commons local models will not deploy offline on {spec.name}: {exc}")

    def _start(self, specs: list[NodeSpec], ymls: list[str]) -> None:
        for spec, yml in zip(specs, ymls, strict=True):
            proc.prepare_run_dir(spec, yml)
            self._place_ml_natives(spec)
            proc.hand_to_node_user(spec, self.home)
        jh = self.java_home()
        proc.launch(specs, [proc.node_env(jh, s) for s in specs], self._log)
