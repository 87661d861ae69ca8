"""Fetching, installing, starting and stopping OpenSearch processes (the I/O edge).

The distribution (``org.opensearch.distribution.integ-test-zip:opensearch``) and
the plugin zips come from Maven Central through ``mvn`` into a Maven repository
under the osrag cache dir, so nothing is fetched from anywhere else.

OpenSearch refuses to start as root. When osrag itself runs as root (CI, these
machines), each node runs as the unprivileged system user ``osrag-node`` via
``runuser``; its home is then a system cache dir that user can enter.
"""

from __future__ import annotations

import base64
import json
import os
import pwd
import re
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

from osrag.devnode.plan import Artifact, Module, NodeSpec, choose_jdk, fetch_pom, jdk_range
from osrag.errors import LauncherError
from osrag.store.locking import pid_alive

NODE_USER = "osrag-node"
Log = Callable[[str], None]


# ---- JDK ------------------------------------------------------------------------
def _java_major(home: Path) -> int:
    try:
        text = (home / "release").read_text()
    except OSError:
        return 0
    m = re.search(r'JAVA_VERSION="(\d+)', text)
    return int(m.group(1)) if m else 0


def installed_jdks() -> list[tuple[int, Path]]:
    """(major, home) of $JAVA_HOME and every JDK under /usr/lib/jvm, symlinks collapsed."""
    seen: dict[Path, tuple[int, Path]] = {}
    for base in (Path(os.environ.get("JAVA_HOME", "/nonexistent")), *sorted(Path("/usr/lib/jvm").glob("*"))):
        major = _java_major(base)
        if major:
            seen.setdefault(base.resolve(), (major, base))
    return list(seen.values())


def java_home_for(version: str, explicit: Path | None) -> Path:
    """OSRAG_DEV_JAVA_HOME when set (and fitting), else the newest installed JDK that fits."""
    if explicit is not None:
        major = _java_major(explicit)
        lo, hi = jdk_range(version)
        if major < lo or (hi is not None and major > hi):
            want = f">= {lo}" if hi is None else f"{lo}..{hi}"
            raise LauncherError(f"OSRAG_DEV_JAVA_HOME={explicit} is not a JDK {want} (OpenSearch {version})")
        return explicit
    return choose_jdk(version, installed_jdks())


# ---- fetch and install ----------------------------------------------------------
def fetch(arts: list[Artifact], m2: Path, java_home: Path, log: Log) -> dict[str, Path]:
    """Each artifact's file, downloaded by one mvn run for all that are missing, then reused."""
    missing = [a for a in arts if not a.path_in(m2).exists()]
    if missing:
        if shutil.which("mvn") is None:
            raise LauncherError("`mvn` is not on PATH; it fetches OpenSearch from Maven Central")
        log(
            f"fetching {len(missing)} artifact(s) from Maven Central: {', '.join(a.coordinate for a in missing)}"
        )
        m2.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="osrag-fetch-") as tmp:
            pom = Path(tmp) / "pom.xml"
            pom.write_text(fetch_pom(missing))
            proc = subprocess.run(
                ["mvn", "-B", "-q", "-f", str(pom), "dependency:resolve", f"-Dmaven.repo.local={m2}"],
                capture_output=True,
                text=True,
                env=dict(os.environ, JAVA_HOME=str(java_home)),
                timeout=1800,
            )
        still = [a.coordinate for a in missing if not a.path_in(m2).exists()]
        if proc.returncode != 0 or still:
            out = proc.stdout + proc.stderr
            m = re.search(r"(could not be resolved|Could not (find|transfer|resolve))[^\n]*", out)
            tail = re.sub(r"\x1b\[[0-9;]*m", "", m.group(0))[:300] if m else _last_error_line(out)
            raise LauncherError(f"mvn could not fetch {', '.join(still) or 'the artifacts'}: {tail}")
    return {a.coordinate: a.path_in(m2) for a in arts}


def install(
    target: Path,
    arts: list[Artifact],
    modules: list[Module],
    m2: Path,
    java_home: Path,
    env: dict[str, str],
    log: Log,
) -> Path:
    """Unpack the core into ``target``, add missing modules, install the plugins; a marker makes it idempotent."""
    marker = target / ".osrag-installed"
    if marker.exists():
        return target
    zips = fetch([*arts, *(j for mod in modules for j in mod.jars)], m2, java_home, log)
    tmp = target.parent / f".unpack-{target.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    log(f"unpacking {zips[arts[0].coordinate].name} into {target}")
    with zipfile.ZipFile(zips[arts[0].coordinate]) as zf:
        zf.extractall(tmp)
    next(tmp.iterdir()).rename(target)
    shutil.rmtree(tmp, ignore_errors=True)
    for p in (target / "bin").iterdir():
        p.chmod(0o755)
    for mod in modules:
        if (target / "modules" / mod.name).exists():
            continue
        log(f"adding module {mod.name} from its Maven jars")
        mdir = target / "modules" / mod.name
        mdir.mkdir(parents=True)
        for jar in mod.jars:
            shutil.copy2(zips[jar.coordinate], mdir / zips[jar.coordinate].name)
        (mdir / "plugin-descriptor.properties").write_text(mod.descriptor(arts[0].version))
        if mod.policy:
            (mdir / "plugin-security.policy").write_text(mod.policy)
    for art in arts[1:]:
        log(f"installing plugin {art.plugin_name}")
        proc = subprocess.run(
            [str(target / "bin" / "opensearch-plugin"), "install", "--batch", zips[art.coordinate].as_uri()],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        if proc.returncode != 0:
            raise LauncherError(
                f"installing plugin {art.plugin_name} failed: {_last_error_line(proc.stdout + proc.stderr)}"
            )
    marker.write_text(json.dumps({"version": arts[0].version, "plugins": [a.plugin_name for a in arts[1:]]}))
    return target


# ---- processes ------------------------------------------------------------------
def node_env(java_home: Path, spec: NodeSpec) -> dict[str, str]:
    jh = str(java_home)
    return dict(
        os.environ,
        JAVA_HOME=jh,
        OPENSEARCH_JAVA_HOME=jh,
        OPENSEARCH_PATH_CONF=str(spec.config_dir),
        OPENSEARCH_JAVA_OPTS=f"-Xms{spec.heap} -Xmx{spec.heap}",
    )


def ensure_config_dir(spec: NodeSpec) -> None:
    """The node's own config dir: a copy of the install's, made once."""
    if not spec.config_dir.exists():
        spec.run_dir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(spec.install_dir / "config", spec.config_dir)


def prepare_run_dir(spec: NodeSpec, yml: str) -> None:
    """The node's config dir with this start's opensearch.yml; data and logs dirs."""
    ensure_config_dir(spec)
    (spec.config_dir / "opensearch.yml").write_text(yml)
    for d in (spec.data_dir, spec.logs_dir):
        d.mkdir(parents=True, exist_ok=True)


def hand_to_node_user(spec: NodeSpec, home: Path) -> None:
    """As root: the node user owns its install, config, data and logs (not files beside them)."""
    if os.geteuid() != 0:
        return
    _ensure_node_user()
    owner = f"{NODE_USER}:{NODE_USER}"
    subprocess.run(
        [
            "chown",
            "-R",
            owner,
            str(spec.install_dir),
            str(spec.config_dir),
            str(spec.data_dir),
            str(spec.logs_dir),
        ],
        check=True,
    )
    subprocess.run(["chown", owner, str(spec.run_dir)], check=True)  # it writes its pid file there
    p = spec.run_dir.parent
    while True:  # the node user must be able to walk down from the cache dir
        p.chmod(0o755)
        if p == home or home not in p.parents:
            break
        p = p.parent


def launch(specs: list[NodeSpec], envs: list[dict[str, str]], log: Log, timeout_s: float = 600.0) -> None:
    """Start every node as a daemon at once (cluster nodes wait for each other while booting).

    ``opensearch -d`` returns once the JVM reports "started"; on a loaded 2-core box three
    3.6 nodes took about five minutes to get there, hence the generous timeout.
    """
    procs = []
    for spec, env in zip(specs, envs, strict=True):
        cmd = [str(spec.install_dir / "bin" / "opensearch"), "-d", "-p", str(spec.pid_file)]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", NODE_USER, "--", *cmd]
        spec.pid_file.unlink(missing_ok=True)
        log(f"starting {spec.name} (OpenSearch {spec.version}) on {spec.url}")
        # The daemon inherits our stdio: send it to a file, or a pipe would never close.
        out = open(spec.logs_dir / "start.log", "wb")  # noqa: SIM115 - closed below
        procs.append(
            (
                spec,
                out,
                subprocess.Popen(
                    cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env
                ),
            )
        )
    errors = []
    for spec, out, proc in procs:
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = -1
        out.close()
        if rc != 0:
            text = (spec.logs_dir / "start.log").read_text(errors="replace")
            errors.append(f"{spec.name}: {_last_error_line(text)} (logs: {spec.logs_dir})")
    if errors:
        raise LauncherError("OpenSearch did not start: " + "; ".join(errors))


def _pid_in(pid_file: Path) -> int | None:
    """The pid the file holds; None when there is no file or it is empty or half-written."""
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def read_pid(pid_file: Path) -> int | None:
    """The pid in the file if that process is still alive."""
    pid = _pid_in(pid_file)
    return pid if pid is not None and pid_alive(pid) else None


def exited(pid_file: Path) -> bool:
    """Whether the pid file names a process that is gone. An empty or half-written file (a
    starting JVM writes its pid file while the launcher watches) is not an exit."""
    pid = _pid_in(pid_file)
    return pid is not None and not pid_alive(pid)


def stop(pid_file: Path, wait_s: float = 60.0) -> bool:
    """Stop exactly the process named by the pid file; False if none was running."""
    pid = read_pid(pid_file)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.5)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
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


# ---- HTTP -------------------------------------------------------------------------
def http_get(
    url: str, *, cafile: Path | None = None, auth: tuple[str, str] | None = None, timeout: float = 2.0
) -> tuple[int | None, object | None]:
    """(HTTP status, JSON body) of a GET; (None, None) when nothing answers."""
    req = urllib.request.Request(url)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        ctx = (
            ssl.create_default_context(cafile=str(cafile) if cafile else None)
            if url.startswith("https")
            else None
        )
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:
            return resp.status, json.loads(resp.read().decode("utf-8"))
    except urllib.error.HTTPError as err:
        return err.code, None
    except (urllib.error.URLError, OSError, ValueError):
        return None, None


def _last_error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "ERROR" in ln or "Exception" in ln or "error" in ln:
            return re.sub(r"\x1b\[[0-9;]*m", "", ln)[:300]
    return re.sub(r"\x1b\[[0-9;]*m", "", lines[-1])[:300] if lines else "no output"


# ---- a node that cannot open an index ------------------------------------------------
#: Log lines that say the node is going down because of an index (native engine library missing,
#: a corrupt or unreadable shard): each names the index as ``[name/uuid]`` or ``[name][shard]``.
_FATAL = re.compile(
    r"UnsatisfiedLinkError|opensearchknn|fatal error in thread|uncaught exception in thread|"
    r"failed to (?:recover|start) shard|shard failed|CorruptIndexException|failed to create index",
    re.IGNORECASE,
)
_INDEX_UUID = re.compile(r"\[([a-z0-9][a-z0-9._+-]*)/([A-Za-z0-9_-]{20,24})\]")
_INDEX_SHARD = re.compile(r"\[([a-z0-9][a-z0-9._+-]*)\]\[(\d+)\]")


def _tail(path: Path, size: int = 400_000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - size))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


#: The line every start of a node logs first: what came before it is an earlier run's.
_NODE_START = re.compile(r"\[o\.o\.n\.Node\s*\] \[[^\]]*\] (?:version\[|initializing)")


def _since_last_start(text: str) -> str:
    starts = list(_NODE_START.finditer(text))
    return text[starts[-1].start() :] if starts else text


def culprit_index(logs_dir: Path, data_dir: Path) -> tuple[str, Path | None, str] | None:
    """(index name, its data folder or None, the log line) of an index the node died opening.

    Read from the end of the node's logs (its cluster log, ``start.log`` and any JVM crash
    report): the last line that says why it went down and names an index; the folder is found
    by the index's uuid, else by its name in the index's own state file.
    """
    texts = [
        _since_last_start(_tail(p))
        for p in sorted(logs_dir.glob("*.log")) + sorted(logs_dir.glob("hs_err_pid*"))
    ]
    texts += [_tail(p) for p in sorted(data_dir.glob("hs_err_pid*"))]
    best: tuple[str, str | None, str] | None = None
    engine: tuple[str, str] | None = None  # (engine, line) of a native library that failed to load
    names: dict[str, str] = {}  # uuid -> index name, from every [name/uuid] the start logged
    for text in texts:
        lines = text.splitlines()
        names.update({m.group(2): m.group(1) for m in _INDEX_UUID.finditer(text)})
        for i, line in enumerate(lines):
            if not _FATAL.search(line):
                continue
            lib = _NATIVE.search(line)
            if lib and engine is None:
                engine = (lib.group(1).lower(), line.strip())
            window = " ".join(lines[max(0, i - 3) : i + 4])
            m = _INDEX_UUID.search(window)
            if m:
                best = (m.group(1), m.group(2), line.strip())
                continue
            m = _INDEX_SHARD.search(window)
            if m and m.group(1) not in ("0", "osrag-dev-node"):
                best = (m.group(1), None, line.strip())
    if best is None and engine is not None:
        # The fatal error names no index (a flush at translog replay): the index whose own state
        # holds that engine's name is the one (faiss since 2.18 is also the default engine).
        found = _index_using(data_dir, engine[0], names)
        if found is not None:
            best = (found[0], found[1], engine[1])
    if best is None:
        return None
    name, uuid, line = best
    return name, index_folder(data_dir, name, uuid), re.sub(r"\x1b\[[0-9;]*m", "", line)[:300]


_NATIVE = re.compile(r"opensearchknn_(faiss|nmslib)", re.IGNORECASE)


def _index_using(data_dir: Path, engine: str, names: dict[str, str]) -> tuple[str, str] | None:
    """(name, uuid) of the first index whose state file names ``engine`` and whose name was logged."""
    for indices in sorted(data_dir.glob("nodes/*/indices")):
        for folder in sorted(p for p in indices.iterdir() if p.is_dir()):
            if folder.name not in names:
                continue
            for state in folder.glob("_state/state-*.st"):
                try:
                    if engine.encode() in state.read_bytes():
                        return names[folder.name], folder.name
                except OSError:
                    continue
    return None


def index_folder(data_dir: Path, name: str, uuid: str | None = None) -> Path | None:
    """The folder under ``data/nodes/*/indices`` holding ``name`` (by uuid, else its state file)."""
    for indices in sorted(data_dir.glob("nodes/*/indices")):
        if uuid and (indices / uuid).is_dir():
            return indices / uuid
        for folder in sorted(p for p in indices.iterdir() if p.is_dir()):
            for state in folder.glob("_state/state-*.st"):
                try:
                    if name.encode() in state.read_bytes():
                        return folder
                except OSError:
                    continue
    return None


def move_aside(folder: Path, name: str, quarantine: Path) -> Path:
    """Move an index's data folder out of the node's data dir (kept, never deleted)."""
    quarantine.mkdir(parents=True, exist_ok=True)
    dest = quarantine / f"{time.strftime('%Y%m%dT%H%M%S')}-{name}-{folder.name}"
    shutil.move(str(folder), str(dest))
    return dest
