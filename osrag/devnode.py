"""A real single-node OpenSearch for development, tests and CI, with no Docker.

The distribution (``org.opensearch.distribution.integ-test-zip:opensearch``) and
the plugin zips come from Maven Central through ``mvn`` into a Maven repository
under the osrag cache dir, so nothing is fetched from anywhere else. Plugins must
match the core version exactly; the set below is what neural-search needs at
runtime: k-NN (which it extends), ml-commons (its inference client) and
job-scheduler (which ml-commons extends). ``transport-grpc``, also extended by
neural-search, is a core module in 3.x.

OpenSearch refuses to start as root. When osrag itself runs as root (CI, these
machines), the node runs as the unprivileged system user ``osrag-node`` via
``runuser``; its home is then a system cache dir that user can enter.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from osrag.errors import LauncherError
from osrag.settings import Settings

NODE_USER = "osrag-node"
MIN_JAVA = 21  # OpenSearch 3.x and its plugins are built for Java 21


@dataclass(frozen=True)
class Artifact:
    group: str
    artifact: str
    version: str
    plugin_name: str | None = None  # name the plugin registers under, when a plugin

    @property
    def coordinate(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}:zip"

    def path_in(self, repo: Path) -> Path:
        return (
            repo.joinpath(*self.group.split("."))
            / self.artifact
            / self.version
            / f"{self.artifact}-{self.version}.zip"
        )


def artifacts(version: str) -> list[Artifact]:
    """Core plus plugins, in install order (a plugin after what it extends)."""
    pv = f"{version}.0"
    return [
        Artifact("org.opensearch.distribution.integ-test-zip", "opensearch", version),
        Artifact("org.opensearch.plugin", "opensearch-job-scheduler", pv, "opensearch-job-scheduler"),
        Artifact("org.opensearch.plugin", "opensearch-knn", pv, "opensearch-knn"),
        Artifact("org.opensearch.plugin", "opensearch-ml-plugin", pv, "opensearch-ml"),
        # Published under the artifactId "neural-search"; it registers as opensearch-neural-search.
        Artifact("org.opensearch.plugin", "neural-search", pv, "opensearch-neural-search"),
    ]


REQUIRED_PLUGINS = ("opensearch-knn", "opensearch-neural-search")


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

    def as_dict(self) -> dict[str, object]:
        return {
            "url": self.url,
            "running": self.running,
            "started_by_osrag": self.started_by_osrag,
            "pid": self.pid,
            "version": self.version,
            "health": self.health,
            "plugins": list(self.plugins),
            "detail": self.detail,
        }


class DevNode:
    """Fetch, install, start, stop and inspect the local node."""

    def __init__(self, settings: Settings, log: callable[[str], None] | None = None) -> None:
        self.s = settings
        self.home = Path(settings.dev_home)
        self.version = settings.dev_opensearch_version
        self._log = log or (lambda msg: None)

    # ---- paths ----------------------------------------------------------------
    @property
    def m2(self) -> Path:
        return self.home / "m2"

    @property
    def install_dir(self) -> Path:
        return self.home / f"opensearch-{self.version}"

    @property
    def data_dir(self) -> Path:
        return self.home / "node" / "data"

    @property
    def logs_dir(self) -> Path:
        return self.home / "node" / "logs"

    @property
    def pid_file(self) -> Path:
        return self.home / "node" / "opensearch.pid"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.s.dev_port}"

    # ---- fetch and install ----------------------------------------------------
    def java_home(self) -> Path:
        if self.s.dev_java_home:
            jh = Path(self.s.dev_java_home)
            if _java_major(jh) < MIN_JAVA:
                raise LauncherError(f"OSRAG_DEV_JAVA_HOME={jh} is not a JDK >= {MIN_JAVA}")
            return jh
        candidates = []
        for base in (
            Path(os.environ.get("JAVA_HOME", "/nonexistent")),
            *sorted(Path("/usr/lib/jvm").glob("*")),
        ):
            major = _java_major(base)
            if major >= MIN_JAVA:
                candidates.append((major, base))
        if not candidates:
            raise LauncherError(
                f"OpenSearch {self.version} needs a JDK >= {MIN_JAVA}; none found in $JAVA_HOME or "
                "/usr/lib/jvm (set OSRAG_DEV_JAVA_HOME)"
            )
        return max(candidates)[1]

    def fetch(self) -> dict[str, Path]:
        """Each artifact's zip, downloaded by mvn once and then reused."""
        if shutil.which("mvn") is None:
            raise LauncherError("`mvn` is not on PATH; it fetches OpenSearch from Maven Central")
        out: dict[str, Path] = {}
        env = dict(os.environ, JAVA_HOME=str(self.java_home()))
        for art in artifacts(self.version):
            path = art.path_in(self.m2)
            if not path.exists():
                self._log(f"fetching {art.coordinate} from Maven Central")
                proc = subprocess.run(
                    [
                        "mvn",
                        "-B",
                        "-q",
                        "dependency:get",
                        f"-Dartifact={art.coordinate}",
                        "-Dtransitive=false",
                        f"-Dmaven.repo.local={self.m2}",
                    ],
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=900,
                )
                if proc.returncode != 0 or not path.exists():
                    tail = _last_error_line(proc.stdout + proc.stderr)
                    raise LauncherError(f"mvn could not fetch {art.coordinate}: {tail}")
            out[art.artifact] = path
        return out

    def install(self) -> Path:
        """Unpack the core and install the plugins; a marker makes it idempotent."""
        marker = self.install_dir / ".osrag-installed"
        if marker.exists():
            return self.install_dir
        zips = self.fetch()
        tmp = self.home / f".unpack-{self.version}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(self.install_dir, ignore_errors=True)
        self._log(f"unpacking OpenSearch {self.version}")
        with zipfile.ZipFile(zips["opensearch"]) as zf:
            zf.extractall(tmp)
        inner = next(tmp.iterdir())
        inner.rename(self.install_dir)
        shutil.rmtree(tmp, ignore_errors=True)
        for p in (self.install_dir / "bin").iterdir():
            p.chmod(0o755)
        env = self._env()
        for art in artifacts(self.version)[1:]:
            self._log(f"installing plugin {art.plugin_name}")
            proc = subprocess.run(
                [
                    str(self.install_dir / "bin" / "opensearch-plugin"),
                    "install",
                    "--batch",
                    zips[art.artifact].as_uri(),
                ],
                capture_output=True,
                text=True,
                env=env,
                timeout=600,
            )
            if proc.returncode != 0:
                raise LauncherError(
                    f"installing plugin {art.plugin_name} failed: {_last_error_line(proc.stdout + proc.stderr)}"
                )
        marker.write_text(
            json.dumps(
                {"version": self.version, "plugins": [a.plugin_name for a in artifacts(self.version)[1:]]}
            )
        )
        return self.install_dir

    # ---- process ----------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        jh = str(self.java_home())
        return dict(
            os.environ,
            JAVA_HOME=jh,
            OPENSEARCH_JAVA_HOME=jh,
            OPENSEARCH_JAVA_OPTS=f"-Xms{self.s.dev_heap} -Xmx{self.s.dev_heap}",
        )

    def _pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def up(self, wait_s: float = 180.0) -> NodeStatus:
        """Start the node, or reuse the one already answering; wait until healthy."""
        current = self.status()
        if current.running:
            missing = [p for p in REQUIRED_PLUGINS if p not in current.plugins]
            if missing:
                raise LauncherError(
                    f"something already answers at {self.url} without plugin(s) {', '.join(missing)}; "
                    "stop it or set OSRAG_DEV_PORT"
                )
            self._log(f"reusing the node at {self.url} (pid {current.pid or 'unknown'})")
            return current
        self.install()
        for d in (self.data_dir, self.logs_dir):
            d.mkdir(parents=True, exist_ok=True)
        cmd = [
            str(self.install_dir / "bin" / "opensearch"),
            "-d",
            "-p",
            str(self.pid_file),
            "-Ediscovery.type=single-node",
            "-Enetwork.host=127.0.0.1",
            f"-Ehttp.port={self.s.dev_port}",
            f"-Etransport.port={self.s.dev_port + 100}",
            f"-Epath.data={self.data_dir}",
            f"-Epath.logs={self.logs_dir}",
            "-Ecluster.name=osrag-dev",
            "-Enode.name=osrag-dev-node",
            # A dev node on a shared disk must not go read-only when the disk fills up.
            "-Ecluster.routing.allocation.disk.threshold_enabled=false",
        ]
        if os.geteuid() == 0:
            _ensure_node_user()
            subprocess.run(
                ["chown", "-R", f"{NODE_USER}:{NODE_USER}", str(self.home / "node"), str(self.install_dir)],
                check=True,
            )
            self.home.chmod(0o755)
            cmd = ["runuser", "-u", NODE_USER, "--", *cmd]
        self._log(f"starting OpenSearch {self.version} on {self.url}")
        self.pid_file.unlink(missing_ok=True)
        # The daemon inherits our stdio: send it to a file, or a pipe would never close.
        start_log = self.logs_dir / "start.log"
        with open(start_log, "wb") as out:
            proc = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(),
                timeout=300,
            )
        if proc.returncode != 0:
            text = start_log.read_text(errors="replace")
            raise LauncherError(f"OpenSearch did not start: {_last_error_line(text)} (logs: {self.logs_dir})")
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            st = self.status()
            if st.running and st.health in ("green", "yellow"):
                return st
            if self.pid_file.exists() and self._pid() is None:
                raise LauncherError(
                    f"OpenSearch exited during start-up; see {self.logs_dir / 'osrag-dev.log'}"
                )
            time.sleep(1.0)
        raise LauncherError(f"OpenSearch did not become healthy within {wait_s:.0f}s; see {self.logs_dir}")

    def down(self, wait_s: float = 60.0) -> bool:
        """Stop exactly the process this launcher started; False if none was running."""
        pid = self._pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.5)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
        self.pid_file.unlink(missing_ok=True)
        return True

    def status(self) -> NodeStatus:
        pid = self._pid()
        info = _get_json(f"{self.url}/")
        if info is None:
            return NodeStatus(self.url, False, pid is not None, pid, detail="not answering")
        health = _get_json(f"{self.url}/_cluster/health") or {}
        plugins = _get_json(f"{self.url}/_cat/plugins?format=json") or []
        names = tuple(sorted({p.get("component", "") for p in plugins}))
        return NodeStatus(
            url=self.url,
            running=True,
            started_by_osrag=pid is not None,
            pid=pid,
            version=info.get("version", {}).get("number"),
            health=health.get("status"),
            plugins=names,
        )


def _java_major(home: Path) -> int:
    release = home / "release"
    try:
        text = release.read_text()
    except OSError:
        return 0
    m = re.search(r'JAVA_VERSION="(\d+)', text)
    return int(m.group(1)) if m else 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return True


def _ensure_node_user() -> None:
    try:
        pwd.getpwnam(NODE_USER)
    except KeyError as missing:
        proc = subprocess.run(
            [
                "useradd",
                "--system",
                "--user-group",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                NODE_USER,
            ],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0 and "already exists" not in proc.stderr:
            raise LauncherError(
                f"cannot create the user {NODE_USER} to run OpenSearch: {proc.stderr.strip()}"
            ) from missing


def _get_json(url: str, timeout: float = 2.0) -> object | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _last_error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "ERROR" in ln or "Exception" in ln or "error" in ln:
            return re.sub(r"\x1b\[[0-9;]*m", "", ln)[:300]
    return re.sub(r"\x1b\[[0-9;]*m", "", lines[-1])[:300] if lines else "no output"
