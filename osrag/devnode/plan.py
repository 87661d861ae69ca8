"""What to fetch, which JDK, which ports and directories, which opensearch.yml.

Pure functions of the version and the layout choice, so every decision the
launcher makes about a node can be unit-tested without a JVM or a network.

Layout under the osrag cache dir (``OSRAG_DEV_HOME``)::

    m2/                               Maven repository all zips are fetched into
    opensearch-<v>/                   an unpacked core + plugins, shared by the nodes of <v>
    opensearch-<v>-security/          the same plus opensearch-security
    node/                             the plain 3.6.0 single node (where osrag always put it)
    node-<v>/                         the plain single node of any other version
    node-<v>-security/                the secured single node (certs, admin password file)
    cluster-<v>/node-<n>/             node n of the local cluster

Each node directory holds its own ``config/`` (``OPENSEARCH_PATH_CONF``),
``data/``, ``logs/`` and ``opensearch.pid``, so versions and flavours run side by
side and never share data.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from osrag.errors import LauncherError

REQUIRED_PLUGINS = ("opensearch-knn", "opensearch-neural-search")
SECURITY_PLUGIN = "opensearch-security"
# The newest line whose opensearch-security zip Maven Central serves (no 3.x release there):
# the secured node's version unless one is asked for.
SECURITY_DEFAULT_VERSION = "2.19.1"
# The plain 3.6.0 single node keeps the directory earlier osrag versions used, so a
# node (and its data) started before per-version directories existed is still found.
LEGACY_RUN_DIR_VERSION = "3.6.0"
CLUSTER_NAME = "osrag-dev-cluster"
CLUSTER_HEAP = "512m"  # three of these fit next to a 1g single node on a 24 GB, 2-core box
ADMIN_USER = "admin"


@dataclass(frozen=True)
class Artifact:
    group: str
    artifact: str
    version: str
    plugin_name: str | None = None  # name the plugin registers under, when a plugin
    packaging: str = "zip"
    classifier: str | None = None  # e.g. a native jar's platform (linux-x86_64)

    @property
    def coordinate(self) -> str:
        tail = f":{self.classifier}" if self.classifier else ""
        return f"{self.group}:{self.artifact}:{self.version}:{self.packaging}{tail}"

    def path_in(self, repo: Path) -> Path:
        tail = f"-{self.classifier}" if self.classifier else ""
        return (
            repo.joinpath(*self.group.split("."))
            / self.artifact
            / self.version
            / f"{self.artifact}-{self.version}{tail}.{self.packaging}"
        )


def fetch_pom(arts: list[Artifact]) -> str:
    """A throwaway POM naming ``arts`` (nothing transitive), so one mvn run fetches them all.

    One JVM start instead of one per artifact: the 2.x node needs ~20 files, and each
    ``mvn dependency:get`` costs seconds to start.
    """
    deps = "".join(
        "    <dependency>"
        f"<groupId>{escape(a.group)}</groupId><artifactId>{escape(a.artifact)}</artifactId>"
        f"<version>{escape(a.version)}</version><type>{escape(a.packaging)}</type>"
        + (f"<classifier>{escape(a.classifier)}</classifier>" if a.classifier else "")
        + "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>"
        "</dependency>\n"
        for a in arts
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>osrag.local</groupId><artifactId>osrag-dev-fetch</artifactId><version>1</version>\n"
        "  <packaging>pom</packaging>\n"
        f"  <dependencies>\n{deps}  </dependencies>\n"
        "</project>\n"
    )


@dataclass(frozen=True)
class Module:
    """A core module the 2.x integ-test-zip leaves out, rebuilt from its jars on Maven Central."""

    name: str
    classname: str
    description: str
    jars: tuple[Artifact, ...]
    extended: tuple[str, ...] = ()
    policy: str = ""

    def descriptor(self, version: str) -> str:
        return "".join(
            f"{k}={v}\n"
            for k, v in (
                ("description", self.description),
                ("version", version),
                ("name", self.name),
                ("classname", self.classname),
                ("java.version", "11"),
                ("opensearch.version", version),
                ("custom.foldername", ""),
                ("extended.plugins", ",".join(self.extended)),
                ("has.native.controller", "false"),
            )
        )


def _jar(group: str, artifact: str, version: str) -> Artifact:
    return Artifact(group, artifact, version, packaging="jar")


def missing_modules(version: str) -> list[Module]:
    """Modules osrag needs that the integ-test-zip of ``version`` does not ship.

    The 3.x integ-test-zip carries every module. The 2.x one carries only
    transport-netty4, so k-NN (which extends lang-painless), the Russian analysis
    chain (analysis-common: stemmer, word_delimiter_graph, pattern filters) and
    server-side ``_reindex`` would be missing. Their jars and the third-party
    versions below are those the 2.19.1 poms name; the launcher checks the
    unpacked ``modules/`` and adds only what is absent.
    """
    if parse_version(version)[0] >= 3:
        return []
    o, p = "org.opensearch", "org.opensearch.plugin"
    asm = tuple(
        _jar("org.ow2.asm", a, "9.7") for a in ("asm", "asm-util", "asm-tree", "asm-commons", "asm-analysis")
    )
    http = "org.apache.httpcomponents"
    return [
        Module(
            "lang-painless",
            "org.opensearch.painless.PainlessPlugin",
            "An easy, safe and fast scripting language for OpenSearch",
            (
                _jar(p, "lang-painless", version),
                _jar(p, "opensearch-scripting-painless-spi", version),
                _jar("org.antlr", "antlr4-runtime", "4.13.1"),
                *asm,
            ),
            policy='grant {\n  permission java.lang.RuntimePermission "createClassLoader";\n'
            '  permission java.lang.RuntimePermission "getClassLoader";\n};\n',
        ),
        Module(
            "analysis-common",
            "org.opensearch.analysis.common.CommonAnalysisPlugin",
            'Adds "built in" analyzers to OpenSearch.',
            (_jar(p, "analysis-common", version),),
            extended=("lang-painless",),
        ),
        Module(
            "reindex",
            "org.opensearch.index.reindex.ReindexPlugin",
            "The Reindex module adds APIs to reindex from one index to another or update documents in place.",
            (
                _jar(p, "reindex-client", version),
                _jar(f"{o}.client", "opensearch-rest-client", version),
                _jar(o, "opensearch-ssl-config", version),
                _jar(http, "httpclient", "4.5.14"),
                _jar(http, "httpcore", "4.4.16"),
                _jar(http, "httpasyncclient", "4.1.5"),
                _jar(http, "httpcore-nio", "4.4.16"),
                _jar("commons-codec", "commons-codec", "1.16.1"),
                _jar("commons-logging", "commons-logging", "1.2"),
            ),
            policy='grant {\n  permission java.net.SocketPermission "*", "connect";\n};\n'
            'grant codeBase "${codebase.opensearch-rest-client}" {\n'
            '  permission java.net.NetPermission "getProxySelector";\n};\n'
            'grant codeBase "${codebase.httpasyncclient}" {\n'
            '  permission java.net.NetPermission "getProxySelector";\n};\n',
        ),
    ]


def parse_version(version: str) -> tuple[int, int, int]:
    """``"2.19.1"`` -> ``(2, 19, 1)``; anything else is refused by name."""
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version.strip())
    if not m:
        raise LauncherError(f"OpenSearch version {version!r} is not of the form MAJOR.MINOR.PATCH")
    major, minor, patch = (int(g) for g in m.groups())
    if major < 2:
        raise LauncherError(f"OpenSearch {version} is not supported by the launcher (2.x or 3.x only)")
    return major, minor, patch


def artifacts(version: str, security: bool = False) -> list[Artifact]:
    """Core plus plugins, in install order (a plugin after what it extends).

    Plugins must match the core exactly (``<core>.0``). neural-search needs at
    runtime k-NN (which it extends), ml-commons (its inference client) and
    job-scheduler (which ml-commons extends); ``transport-grpc``, also extended by
    neural-search in 3.x, is a core module there.
    """
    parse_version(version)
    pv = f"{version}.0"
    arts = [
        Artifact("org.opensearch.distribution.integ-test-zip", "opensearch", version),
        Artifact("org.opensearch.plugin", "opensearch-job-scheduler", pv, "opensearch-job-scheduler"),
        Artifact("org.opensearch.plugin", "opensearch-knn", pv, "opensearch-knn"),
        Artifact("org.opensearch.plugin", "opensearch-ml-plugin", pv, "opensearch-ml"),
        # Published under the artifactId "neural-search"; it registers as opensearch-neural-search.
        Artifact("org.opensearch.plugin", "neural-search", pv, "opensearch-neural-search"),
    ]
    if security:
        # First, so the plugins after it see the security plugin (ml-commons reads it when present).
        arts.insert(1, Artifact("org.opensearch.plugin", "opensearch-security", pv, SECURITY_PLUGIN))
    return arts


def jdk_range(version: str) -> tuple[int, int | None]:
    """Inclusive (min, max) Java major for a version; max None means no upper bound.

    2.x needs Java 17 and still installs a SecurityManager, which Java 24 removed,
    so 2.x stops at 23. 3.x and its plugins are built for 21 and run on newer JDKs.
    """
    major = parse_version(version)[0]
    return (17, 23) if major == 2 else (21, None)


def choose_jdk(version: str, candidates: list[tuple[int, Path]]) -> Path:
    """The newest candidate JDK (major, home) inside the version's range."""
    lo, hi = jdk_range(version)
    fitting = [(m, p) for m, p in candidates if m >= lo and (hi is None or m <= hi)]
    if not fitting:
        want = f">= {lo}" if hi is None else f"{lo}..{hi}"
        found = ", ".join(f"{p} ({m})" for m, p in sorted(candidates)) or "none"
        raise LauncherError(
            f"OpenSearch {version} needs a JDK {want}; found {found} (set OSRAG_DEV_JAVA_HOME)"
        )
    return max(fitting)[1]


def single_http_port(version: str, security: bool) -> int:
    """Default HTTP port of a single node: 3.x 9200, 2.x 9201, any secured node 9202."""
    if security:
        return 9202
    return 9201 if parse_version(version)[0] == 2 else 9200


def cluster_http_ports(version: str, nodes: int) -> list[int]:
    """3.x cluster on 9220.., 2.x cluster on 9230.. (transport: +100)."""
    if not 1 <= nodes <= 9:
        raise LauncherError(f"--nodes must be between 1 and 9, not {nodes}")
    base = 9230 if parse_version(version)[0] == 2 else 9220
    return [base + i for i in range(nodes)]


def transport_port(http_port: int) -> int:
    return http_port + 100


@dataclass(frozen=True)
class NodeSpec:
    """Everything that makes one node process distinct from every other one."""

    name: str
    version: str
    http_port: int
    run_dir: Path
    install_dir: Path
    heap: str
    cluster_name: str = "osrag-dev"
    seed_hosts: tuple[str, ...] = ()  # empty: a single-node cluster
    initial_managers: tuple[str, ...] = ()
    security: bool = False
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def transport_port(self) -> int:
        return transport_port(self.http_port)

    @property
    def scheme(self) -> str:
        return "https" if self.security else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.http_port}"

    @property
    def config_dir(self) -> Path:
        return self.run_dir / "config"

    @property
    def data_dir(self) -> Path:
        return self.run_dir / "data"

    @property
    def logs_dir(self) -> Path:
        return self.run_dir / "logs"

    @property
    def pid_file(self) -> Path:
        return self.run_dir / "opensearch.pid"


def install_dir(home: Path, version: str, security: bool) -> Path:
    return home / (f"opensearch-{version}-security" if security else f"opensearch-{version}")


def plan_single(
    home: Path, version: str, *, security: bool = False, port: int | None = None, heap: str = "1g"
) -> NodeSpec:
    """The one-node layout of a version (and flavour)."""
    parse_version(version)
    if security:
        run_dir = home / f"node-{version}-security"
    elif version == LEGACY_RUN_DIR_VERSION:
        run_dir = home / "node"
    else:
        run_dir = home / f"node-{version}"
    return NodeSpec(
        name="osrag-dev-node",
        version=version,
        http_port=port if port is not None else single_http_port(version, security),
        run_dir=run_dir,
        install_dir=install_dir(home, version, security),
        heap=heap,
        security=security,
    )


def plan_cluster(home: Path, version: str, nodes: int, *, heap: str = CLUSTER_HEAP) -> list[NodeSpec]:
    """``nodes`` cluster-manager-eligible data nodes on 127.0.0.1 that discover each other."""
    ports = cluster_http_ports(version, nodes)
    names = tuple(f"osrag-{version}-n{i + 1}" for i in range(nodes))
    seeds = tuple(f"127.0.0.1:{transport_port(p)}" for p in ports)
    base = home / f"cluster-{version}"
    return [
        NodeSpec(
            name=names[i],
            version=version,
            http_port=ports[i],
            run_dir=base / f"node-{i + 1}",
            install_dir=install_dir(home, version, False),
            heap=heap,
            cluster_name=CLUSTER_NAME,
            seed_hosts=seeds,
            initial_managers=names,
        )
        for i in range(nodes)
    ]


def security_settings(admin_dn: str, node_dn: str) -> dict[str, object]:
    """opensearch-security settings for TLS on both layers, our own CA and basic auth."""
    return {
        "plugins.security.ssl.transport.pemcert_filepath": "certs/node.pem",
        "plugins.security.ssl.transport.pemkey_filepath": "certs/node-key.pem",
        "plugins.security.ssl.transport.pemtrustedcas_filepath": "certs/ca.pem",
        "plugins.security.ssl.transport.enforce_hostname_verification": False,
        "plugins.security.ssl.http.enabled": True,
        "plugins.security.ssl.http.pemcert_filepath": "certs/node.pem",
        "plugins.security.ssl.http.pemkey_filepath": "certs/node-key.pem",
        "plugins.security.ssl.http.pemtrustedcas_filepath": "certs/ca.pem",
        # A client MAY present a certificate signed by the CA (OSRAG_AUTH=cert); basic auth still works.
        "plugins.security.ssl.http.clientauth_mode": "OPTIONAL",
        # The security index is created from config/opensearch-security/*.yml at first start,
        # so no securityadmin run (and no admin certificate on the client side) is needed.
        "plugins.security.allow_default_init_securityindex": True,
        "plugins.security.authcz.admin_dn": [admin_dn],
        "plugins.security.nodes_dn": [node_dn],
        "plugins.security.restapi.roles_enabled": ["all_access", "security_rest_api_access"],
        "plugins.security.system_indices.enabled": True,
        "plugins.security.check_snapshot_restore_write_privileges": True,
        "plugins.security.enable_snapshot_restore_privilege": True,
    }


#: ml-commons on a dev node: models run on the data nodes (a dev node is no dedicated ML node), the
#: native-memory breaker (90 % of a busy 2-core box's RAM is reached by other work) only at 99 %,
#: local model zips may be registered by upload, and a connector may call a server on loopback
#: (the tests' OpenAI-compatible server). docs/cluster-models.md says what each is for.
ML_COMMONS_SETTINGS: dict[str, object] = {
    "plugins.ml_commons.only_run_on_ml_node": False,
    "plugins.ml_commons.native_memory_threshold": 99,
    # A 1 GB dev heap holding an embedding model runs at ~85-90 %: ml-commons' heap breaker (85) would
    # then refuse every predict.
    "plugins.ml_commons.jvm_heap_memory_threshold": 95,
    "plugins.ml_commons.allow_registering_model_via_local_file": True,
    "plugins.ml_commons.connector.private_ip_enabled": True,
    # ml-commons 3.6's own list, plus loopback (setting the list replaces it, so it is repeated here)
    "plugins.ml_commons.trusted_connector_endpoints_regex": [
        r"^https://runtime\.sagemaker\..*[a-z0-9-]\.amazonaws\.com/.*$",
        r"^https://api\.sagemaker\..*[a-z0-9-]\.amazonaws\.com/.*$",
        r"^https://api\.openai\.com/.*$",
        r"^https://api\.cohere\.ai/.*$",
        r"^https://api\.deepseek\.com/.*$",
        r"^https://generativelanguage\.googleapis\.com/.*$",
        r"^https://bedrock-runtime\..*[a-z0-9-]\.amazonaws\.com/.*$",
        r"^https://bedrock-agent-runtime\..*[a-z0-9-]\.amazonaws\.com/.*$",
        r"^https://bedrock\..*[a-z0-9-]\.amazonaws\.com/.*$",
        r"^http://127\.0\.0\.1:[0-9]+/.*$",
        r"^http://localhost:[0-9]+/.*$",
    ],
}


def ml_commons_settings(version: str) -> dict[str, object]:
    """``ML_COMMONS_SETTINGS`` for ``version``: the private-IP switch only where ml-commons has it (3.x);
    an unknown setting in opensearch.yml stops a node from starting."""
    settings = dict(ML_COMMONS_SETTINGS)
    if parse_version(version) < (3, 0, 0):
        settings.pop("plugins.ml_commons.connector.private_ip_enabled")
    return settings


def opensearch_yml(spec: NodeSpec, security: dict[str, object] | None = None) -> str:
    """The node's whole opensearch.yml; values are JSON, which YAML reads as-is."""
    settings: dict[str, object] = {
        "cluster.name": spec.cluster_name,
        "node.name": spec.name,
        "network.host": "127.0.0.1",
        "http.port": spec.http_port,
        "transport.port": spec.transport_port,
        "path.data": str(spec.data_dir),
        "path.logs": str(spec.logs_dir),
        # A dev node on a shared disk must not go read-only when the disk fills up.
        "cluster.routing.allocation.disk.threshold_enabled": False,
    }
    if spec.seed_hosts:
        settings["discovery.seed_hosts"] = list(spec.seed_hosts)
        settings["cluster.initial_cluster_manager_nodes"] = list(spec.initial_managers)
    else:
        settings["discovery.type"] = "single-node"
    settings.update(ml_commons_settings(spec.version))
    settings.update(spec.extra)
    if security:
        settings.update(security)
    lines = ["# Written by osrag's local launcher at every start; edits are overwritten."]
    lines += [f"{k}: {json.dumps(v)}" for k, v in settings.items()]
    return "\n".join(lines) + "\n"
