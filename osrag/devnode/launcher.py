"""Local OpenSearch for development, tests and CI, with no Docker: one node.

``DevNode`` is one node of a version (plain, or ``security=True`` for TLS +
basic auth); ``DevCluster`` (``osrag.devnode.cluster``) is n nodes of one version
forming one cluster. Both fetch through Maven, start, stop exactly the processes
they started (by pid file) and hand out a ``Settings`` that points at what they run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from pydantic import SecretStr

from osrag.devnode import process as proc
from osrag.devnode import security as sec
from osrag.devnode.base import LauncherBase, NodeStatus
from osrag.devnode.plan import (
    ADMIN_USER,
    REQUIRED_PLUGINS,
    SECURITY_DEFAULT_VERSION,
    NodeSpec,
    opensearch_yml,
    plan_single,
    security_settings,
)
from osrag.errors import LauncherError
from osrag.settings import Settings


class DevNode(LauncherBase):
    """Fetch, install, start, stop and inspect one local node of a version."""

    def __init__(
        self,
        settings: Settings,
        log: proc.Log | None = None,
        *,
        version: str | None = None,
        security: bool = False,
    ) -> None:
        if security and version is None and "dev_opensearch_version" not in settings.model_fields_set:
            version = SECURITY_DEFAULT_VERSION
        super().__init__(settings, log, version)
        self.security = security
        self.spec = plan_single(
            self.home, self.version, security=security, port=settings.dev_port, heap=settings.dev_heap
        )

    def _any_spec(self) -> NodeSpec:
        return self.spec

    # ---- paths ----------------------------------------------------------------
    @property
    def install_dir(self) -> Path:
        return self.spec.install_dir

    @property
    def data_dir(self) -> Path:
        return self.spec.data_dir

    @property
    def logs_dir(self) -> Path:
        return self.spec.logs_dir

    @property
    def pid_file(self) -> Path:
        return self.spec.pid_file

    @property
    def url(self) -> str:
        return self.spec.url

    @property
    def ca_file(self) -> Path:
        return self.spec.config_dir / "certs" / "ca.pem"

    @property
    def password_file(self) -> Path:
        """0600, beside (not inside) what the node user owns."""
        return self.spec.run_dir / "admin-password"

    @property
    def admin_cert_files(self) -> tuple[Path, Path]:
        """(cert, key) of the admin client certificate (the plugin's admin_dn), for securityadmin."""
        d = self.spec.run_dir / "client"
        return d / "admin.pem", d / "admin-key.pem"

    def client_cert_files(self, cn: str) -> tuple[Path, Path, str]:
        """(cert, key, DN) of a client certificate for ``cn`` signed by this node's CA, made once.

        For ``OSRAG_AUTH=cert`` against the secured node: the node authenticates it as the user
        named by its DN (``clientcert_auth_domain``); map that DN to a role to give it rights."""
        if not cn or not all(c.isalnum() or c in "-_." for c in cn):
            raise LauncherError(f"client certificate name {cn!r}: letters, digits, - _ . only")
        d = self.spec.run_dir / "client"
        cert, key, dn_file = d / f"{cn}.pem", d / f"{cn}-key.pem", d / f"{cn}.dn"
        if not (cert.exists() and key.exists() and dn_file.exists()):
            try:
                ca_cert, ca_key = self.ca_file.read_bytes(), (d / "ca-key.pem").read_bytes()
            except OSError as exc:
                raise LauncherError(
                    f"no dev CA at {self.ca_file}; start the node first (osrag dev up --security)"
                ) from exc
            pem, key_pem, dn = sec.issue_client_cert(ca_cert, ca_key, cn)
            cert.write_bytes(pem)
            sec.write_private(key, key_pem)
            dn_file.write_text(dn)
        return cert, key, dn_file.read_text().strip()

    # ---- API for other code ---------------------------------------------------
    def client_settings(self, **overrides: object) -> Settings:
        """``Settings`` pointing at this node: its URL and, when secured, CA, admin user and password."""
        update: dict[str, object] = {"url": self.url}
        if self.security:
            update.update(
                ca_certs=self.ca_file,
                user=ADMIN_USER,
                password=SecretStr(self._password()),
                verify_certs=True,
            )
        update.update(overrides)
        if isinstance(update.get("password"), str):  # model_copy does not validate: keep it a secret
            update["password"] = SecretStr(str(update["password"]))
        return self.s.model_copy(update=update)

    def _password(self) -> str:
        try:
            return self.password_file.read_text().strip()
        except OSError as exc:
            raise LauncherError(
                f"no admin password file at {self.password_file}; start the node first (osrag dev up --security)"
            ) from exc

    def install(self) -> Path:
        return self._install(self.security, self.install_dir)

    # ---- process ----------------------------------------------------------------
    def up(self, wait_s: float = 240.0, repair: bool = False) -> NodeStatus:
        """Start the node, or reuse the one already answering; wait until healthy.

        A node that dies on start-up because of an index it cannot open (a faiss index on a node
        without the native library, a corrupt shard) is named by the index; with ``repair`` that
        index's data folder is moved aside (``<dev home>/quarantine/``, never deleted) and the
        node started again."""
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
        if self.security and current.detail.startswith("HTTP"):
            raise LauncherError(f"something already answers at {self.url} ({current.detail}); stop it first")
        self.install()
        security = self._ensure_security_files() if self.security else None
        starting = proc.read_pid(self.pid_file)  # an earlier `up` timed out; its JVM still boots
        moved: list[str] = []
        for _ in range(4 if repair else 1):  # each round can move one index aside
            t0 = time.monotonic()
            try:
                if starting is None:
                    self._start([self.spec], [opensearch_yml(self.spec, security)])
                else:
                    self._log(f"the node started earlier (pid {starting}) is still starting; waiting for it")
                    starting = None
            except LauncherError as exc:  # died before it detached (its reason and logs named)
                died = str(exc)
            else:
                # After a repair the moved index has no data left to allocate: red is expected.
                st = self._wait_healthy(t0, wait_s, allow_red=bool(moved))  # a timeout is its own error
                if st is not None:
                    if moved and st.health == "red":
                        self._log(
                            f"red: index(es) {', '.join(moved)} have no data here any more (kept in "
                            f"{self.home / 'quarantine'}); delete them, or restore their folders with the node down"
                        )
                    return st
                died = f"OpenSearch exited during start-up; see {self.logs_dir}"
            found = proc.culprit_index(self.logs_dir, self.data_dir)
            if found is None:
                raise LauncherError(died)
            name, folder, line = found
            if not repair:
                raise LauncherError(
                    f"OpenSearch exited during start-up: it cannot open index {name} ({line}); "
                    f"`osrag dev up --repair` moves that index's data aside (kept) and starts"
                )
            if folder is None:
                raise LauncherError(
                    f"OpenSearch cannot open index {name}, but its data folder is not under {self.data_dir}"
                )
            dest = proc.move_aside(folder, name, self.home / "quarantine")
            moved.append(name)
            self._log(f"index {name} could not be opened ({line}); its data moved to {dest}; starting again")
        raise LauncherError(
            f"OpenSearch still exits during start-up after moving indices aside; see {self.logs_dir}"
        )

    def _wait_healthy(self, t0: float, wait_s: float, allow_red: bool = False) -> NodeStatus | None:
        """The status once healthy; None when the process died; a LauncherError on timeout."""
        deadline = t0 + wait_s
        ok = ("green", "yellow", "red") if allow_red else ("green", "yellow")
        while time.monotonic() < deadline:
            st = self.status()
            if st.running and st.health in ok:
                self._log(f"{self.spec.name} healthy after {time.monotonic() - t0:.0f}s")
                return st
            if proc.exited(self.pid_file):
                return None
            time.sleep(1.0)
        raise LauncherError(f"OpenSearch did not become healthy within {wait_s:.0f}s; see {self.logs_dir}")

    def _ensure_security_files(self) -> dict[str, object]:
        """Certificates, users and password, made once; the plugin settings that use them."""
        certs_dir = self.spec.config_dir / "certs"
        client_dir = self.spec.run_dir / "client"
        proc.ensure_config_dir(self.spec)
        if not (certs_dir / "node.pem").exists():
            self._log("generating a CA, node and admin certificate")
            cs = sec.generate_certs()
            certs_dir.mkdir(parents=True, exist_ok=True)
            (certs_dir / "ca.pem").write_bytes(cs.ca_cert)
            (certs_dir / "node.pem").write_bytes(cs.node_cert)
            sec.write_private(certs_dir / "node-key.pem", cs.node_key)
            (client_dir).mkdir(parents=True, exist_ok=True)
            (client_dir / "admin.pem").write_bytes(cs.admin_cert)
            sec.write_private(client_dir / "admin-key.pem", cs.admin_key)
            sec.write_private(client_dir / "ca-key.pem", cs.ca_key)
            (client_dir / "dns.json").write_text(json.dumps({"node": cs.node_dn, "admin": cs.admin_dn}))
        if not self.password_file.exists():
            self._log(f"generating the admin password into {self.password_file}")
            password = sec.new_password()
            sec.write_private(self.password_file, password.encode())
            sec_dir = self.spec.config_dir / "opensearch-security"
            (sec_dir / "internal_users.yml").write_text(sec.internal_users_yml(sec.bcrypt_hash(password)))
            (sec_dir / "roles_mapping.yml").write_text(sec.roles_mapping_yml())
            (sec_dir / "config.yml").write_text(sec.config_yml())
        dns = json.loads((client_dir / "dns.json").read_text())
        return security_settings(admin_dn=dns["admin"], node_dn=dns["node"])

    def down(self, wait_s: float = 60.0) -> bool:
        """Stop exactly the process this launcher started; False if none was running."""
        return proc.stop(self.pid_file, wait_s)

    def status(self) -> NodeStatus:
        pid = proc.read_pid(self.pid_file)
        cafile = auth = None
        extra: dict[str, object] = {"name": self.spec.name}
        if (self.install_dir / ".osrag-installed").exists():
            from osrag.capabilities import engines_from_install

            extra["engines"] = tuple(engines_from_install(self.install_dir).items())
        if self.security:
            cafile = self.ca_file
            extra.update(ca_certs=str(self.ca_file), user=ADMIN_USER, password_file=str(self.password_file))
            if self.password_file.exists():
                auth = (ADMIN_USER, self._password())
        # TLS and a bcrypt check per request: seconds on a loaded 2-core box, not the plain node's 2 s.
        wait = 10.0 if self.security else 2.0
        code, info = proc.http_get(f"{self.url}/", cafile=cafile, auth=auth, timeout=wait)
        if not isinstance(info, dict):
            detail = "not answering" if code is None else f"HTTP {code} on GET /"
            return NodeStatus(self.url, False, pid is not None, pid, detail=detail, **extra)
        _, health = proc.http_get(f"{self.url}/_cluster/health", cafile=cafile, auth=auth, timeout=wait)
        _, plugins = proc.http_get(
            f"{self.url}/_cat/plugins?format=json", cafile=cafile, auth=auth, timeout=wait
        )
        names = tuple(sorted({p.get("component", "") for p in plugins or []}))
        return NodeStatus(
            url=self.url,
            running=True,
            started_by_osrag=pid is not None,
            pid=pid,
            version=info.get("version", {}).get("number"),
            health=(health or {}).get("status"),
            plugins=names,
            **extra,
        )
