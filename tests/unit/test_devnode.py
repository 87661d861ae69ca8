from __future__ import annotations

import stat
from pathlib import Path

import pytest
import yaml

from osrag.devnode import DevCluster, DevNode
from osrag.devnode.plan import (
    CLUSTER_NAME,
    REQUIRED_PLUGINS,
    artifacts,
    choose_jdk,
    missing_modules,
    opensearch_yml,
    parse_version,
    plan_cluster,
    plan_single,
    security_settings,
)
from osrag.devnode.process import _java_major, _last_error_line
from osrag.devnode.security import (
    bcrypt_hash,
    generate_certs,
    internal_users_yml,
    roles_mapping_yml,
    write_private,
)
from osrag.errors import LauncherError
from osrag.settings import Settings


def _settings(tmp_path: Path, **kw: object) -> Settings:
    return Settings(dev_home=tmp_path, _env_file=None, **kw)


# ---- artifacts and modules ----------------------------------------------------------
@pytest.mark.parametrize("version", ["3.6.0", "2.19.1"])
def test_artifacts_match_the_core_version_exactly(version: str) -> None:
    arts = artifacts(version)
    assert arts[0].coordinate == f"org.opensearch.distribution.integ-test-zip:opensearch:{version}:zip"
    assert all(a.version == f"{version}.0" for a in arts[1:])
    names = [a.plugin_name for a in arts[1:]]
    for needed in REQUIRED_PLUGINS:
        assert needed in names
    assert "opensearch-security" not in names
    # A plugin is installed after the plugins it extends.
    assert names.index("opensearch-knn") < names.index("opensearch-neural-search")
    assert names.index("opensearch-job-scheduler") < names.index("opensearch-ml")
    p = arts[4].path_in(Path("/m2"))
    assert p == Path(f"/m2/org/opensearch/plugin/neural-search/{version}.0/neural-search-{version}.0.zip")


def test_security_adds_the_plugin_at_the_core_version() -> None:
    arts = artifacts("2.19.1", security=True)
    sec = [a for a in arts if a.plugin_name == "opensearch-security"]
    assert [a.coordinate for a in sec] == ["org.opensearch.plugin:opensearch-security:2.19.1.0:zip"]


def test_only_2x_rebuilds_modules_and_their_descriptors_name_the_version() -> None:
    assert missing_modules("3.6.0") == []
    mods = {m.name: m for m in missing_modules("2.19.1")}
    assert set(mods) == {"lang-painless", "analysis-common", "reindex"}
    desc = dict(ln.split("=", 1) for ln in mods["analysis-common"].descriptor("2.19.1").splitlines())
    assert desc["opensearch.version"] == "2.19.1" and desc["version"] == "2.19.1"
    assert desc["extended.plugins"] == "lang-painless"  # k-NN and analysis-common both extend painless
    jars = [a.coordinate for a in mods["lang-painless"].jars]
    assert "org.opensearch.plugin:lang-painless:2.19.1:jar" in jars
    assert all(a.packaging == "jar" for m in mods.values() for a in m.jars)
    assert "createClassLoader" in mods["lang-painless"].policy


@pytest.mark.parametrize("bad", ["2.19", "latest", "1.3.0", "3.6.0-SNAPSHOT"])
def test_bad_versions_are_refused_by_name(bad: str) -> None:
    with pytest.raises(LauncherError, match="version|not supported"):
        parse_version(bad)


# ---- JDK ------------------------------------------------------------------------------
def test_jdk_choice_per_line() -> None:
    jdks = [(17, Path("/jvm/17")), (25, Path("/jvm/25")), (21, Path("/jvm/21"))]
    assert choose_jdk("2.19.1", jdks) == Path("/jvm/21")  # the newest that fits
    assert choose_jdk("2.19.1", jdks[:2]) == Path("/jvm/17")  # 2.x keeps a SecurityManager: <= 23
    assert choose_jdk("3.6.0", jdks) == Path("/jvm/25")
    with pytest.raises(LauncherError, match=r"needs a JDK 17\.\.23"):
        choose_jdk("2.19.1", [(25, Path("/jvm/25"))])
    with pytest.raises(LauncherError, match="needs a JDK >= 21"):
        choose_jdk("3.6.0", [(17, Path("/jvm/17"))])


def test_java_major_reads_the_release_file(tmp_path: Path) -> None:
    (tmp_path / "release").write_text('IMPLEMENTOR="x"\nJAVA_VERSION="25.0.1"\n')
    assert _java_major(tmp_path) == 25
    assert _java_major(tmp_path / "missing") == 0


def test_too_old_explicit_jdk_is_refused(tmp_path: Path) -> None:
    (tmp_path / "release").write_text('JAVA_VERSION="17.0.15"\n')
    node = DevNode(Settings(dev_java_home=tmp_path, dev_home=tmp_path / "h", _env_file=None))
    with pytest.raises(LauncherError, match="JDK >= 21"):
        node.java_home()
    assert DevNode(node.s, version="2.19.1").java_home() == tmp_path


# ---- ports and directories --------------------------------------------------------------
def test_port_plan_lets_lines_and_flavours_run_side_by_side(tmp_path: Path) -> None:
    plans = [
        plan_single(tmp_path, "3.6.0"),
        plan_single(tmp_path, "2.19.1"),
        plan_single(tmp_path, "2.19.1", security=True),
        *plan_cluster(tmp_path, "3.6.0", 3),
        *plan_cluster(tmp_path, "2.19.1", 3),
    ]
    http = [p.http_port for p in plans]
    assert http == [9200, 9201, 9202, 9220, 9221, 9222, 9230, 9231, 9232]
    assert [p.transport_port for p in plans[:3]] == [9300, 9301, 9302]
    ports = http + [p.transport_port for p in plans]
    assert len(set(ports)) == len(ports)
    for attr in ("run_dir", "pid_file", "data_dir", "config_dir"):
        values = [getattr(p, attr) for p in plans]
        assert len(set(values)) == len(values), attr
    # The plain 3.6.0 node stays where earlier osrag put it; installs are per version and flavour.
    assert plans[0].run_dir == tmp_path / "node"
    assert plans[1].install_dir == tmp_path / "opensearch-2.19.1"
    assert plans[2].install_dir == tmp_path / "opensearch-2.19.1-security"
    assert plans[2].url == "https://127.0.0.1:9202"


def test_settings_port_and_version_reach_the_node(tmp_path: Path) -> None:
    node = DevNode(_settings(tmp_path, dev_port=9250, dev_opensearch_version="2.19.1"))
    assert node.url == "http://127.0.0.1:9250" and node.version == "2.19.1"
    assert node.spec.transport_port == 9350


def test_cluster_nodes_are_addressed_by_number(tmp_path: Path) -> None:
    c = DevCluster(_settings(tmp_path), nodes=3)
    assert c.urls == ["http://127.0.0.1:9220", "http://127.0.0.1:9221", "http://127.0.0.1:9222"]
    assert c.client_settings(node=2).url == "http://127.0.0.1:9221"
    assert all(s.heap == "512m" for s in c.specs)
    with pytest.raises(LauncherError, match="nodes 1..3"):
        c.spec(4)
    assert DevCluster(_settings(tmp_path, dev_heap="1g"), nodes=3).specs[0].heap == "1g"


# ---- opensearch.yml ---------------------------------------------------------------------
def test_single_node_yml(tmp_path: Path) -> None:
    spec = plan_single(tmp_path, "2.19.1")
    conf = yaml.safe_load(opensearch_yml(spec))
    assert conf["discovery.type"] == "single-node"
    assert conf["http.port"] == 9201 and conf["transport.port"] == 9301
    assert conf["network.host"] == "127.0.0.1"
    assert conf["path.data"] == str(tmp_path / "node-2.19.1" / "data")
    assert conf["cluster.routing.allocation.disk.threshold_enabled"] is False
    assert "discovery.seed_hosts" not in conf and not any(k.startswith("plugins.security") for k in conf)


def test_cluster_yml_lists_every_transport_port(tmp_path: Path) -> None:
    specs = plan_cluster(tmp_path, "3.6.0", 3)
    confs = [yaml.safe_load(opensearch_yml(s)) for s in specs]
    assert {c["cluster.name"] for c in confs} == {CLUSTER_NAME}
    assert len({c["node.name"] for c in confs}) == 3
    for c in confs:
        assert c["discovery.seed_hosts"] == ["127.0.0.1:9320", "127.0.0.1:9321", "127.0.0.1:9322"]
        assert c["cluster.initial_cluster_manager_nodes"] == [x["node.name"] for x in confs]
        assert "discovery.type" not in c
    assert confs[1]["path.data"] == str(tmp_path / "cluster-3.6.0" / "node-2" / "data")


def test_secured_yml_turns_on_tls_and_names_the_dns(tmp_path: Path) -> None:
    spec = plan_single(tmp_path, "2.19.1", security=True)
    sec = security_settings(admin_dn="CN=a,O=x", node_dn="CN=n,O=x")
    conf = yaml.safe_load(opensearch_yml(spec, sec))
    assert conf["plugins.security.ssl.http.enabled"] is True
    assert conf["plugins.security.ssl.transport.pemtrustedcas_filepath"] == "certs/ca.pem"
    assert conf["plugins.security.authcz.admin_dn"] == ["CN=a,O=x"]
    assert conf["plugins.security.nodes_dn"] == ["CN=n,O=x"]
    assert conf["plugins.security.allow_default_init_securityindex"] is True
    assert conf["http.port"] == 9202


# ---- certificates, users, password --------------------------------------------------------
def test_generated_certificates_chain_to_the_ca_and_cover_localhost() -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import padding

    cs = generate_certs()
    ca = x509.load_pem_x509_certificate(cs.ca_cert)
    node = x509.load_pem_x509_certificate(cs.node_cert)
    admin = x509.load_pem_x509_certificate(cs.admin_cert)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    for leaf in (node, admin):
        assert leaf.issuer == ca.subject
        ca.public_key().verify(
            leaf.signature, leaf.tbs_certificate_bytes, padding.PKCS1v15(), leaf.signature_hash_algorithm
        )
        assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    san = node.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in san.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert cs.node_dn == "CN=osrag-node,O=osrag dev" and cs.admin_dn == "CN=osrag-admin,O=osrag dev"
    for key in (cs.node_key, cs.admin_key, cs.ca_key):
        assert key.startswith(b"-----BEGIN PRIVATE KEY-----")  # PKCS#8, unencrypted: what the plugin reads
    # Two runs never share a key.
    assert generate_certs().ca_key != cs.ca_key


def test_internal_users_hold_only_the_admin_with_a_verifiable_hash() -> None:
    import bcrypt

    h = bcrypt_hash("s3cret-Aa1!")
    users = yaml.safe_load(internal_users_yml(h))
    assert set(users) == {"_meta", "admin"}
    assert users["_meta"] == {"type": "internalusers", "config_version": 2}
    assert users["admin"]["hash"].startswith("$2a$12$")
    assert bcrypt.checkpw(b"s3cret-Aa1!", users["admin"]["hash"].encode())
    assert not bcrypt.checkpw(b"admin", users["admin"]["hash"].encode())
    assert "s3cret" not in internal_users_yml(h)
    mapping = yaml.safe_load(roles_mapping_yml())
    assert mapping["all_access"]["users"] == ["admin"]


def test_private_files_are_0600_from_the_start(tmp_path: Path) -> None:
    p = tmp_path / "sub" / "admin-password"
    write_private(p, b"x")
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    write_private(p, b"y")  # rewritten, still private
    assert p.read_bytes() == b"y" and stat.S_IMODE(p.stat().st_mode) == 0o600


def test_secured_client_settings_read_the_password_file_only_when_asked(tmp_path: Path) -> None:
    node = DevNode(_settings(tmp_path), version="2.19.1", security=True)  # no I/O at construction
    with pytest.raises(LauncherError, match="no admin password file"):
        node.client_settings()
    write_private(node.password_file, b"pw-from-file\n")
    s = node.client_settings(alias="x")
    assert s.url == "https://127.0.0.1:9202" and s.alias == "x"
    assert s.user == "admin" and s.password is not None and s.password.get_secret_value() == "pw-from-file"
    assert s.ca_certs == tmp_path / "node-2.19.1-security" / "config" / "certs" / "ca.pem"
    assert s.tls_verify is True
    assert "pw-from-file" not in repr(s) and "pw-from-file" not in str(node.status().as_dict())
    # --security alone means the line the plugin is published for; an explicit version wins.
    assert DevNode(_settings(tmp_path), security=True).version == "2.19.1"
    assert DevNode(_settings(tmp_path, dev_opensearch_version="2.18.0"), security=True).version == "2.18.0"
    plain = DevNode(_settings(tmp_path), version="2.19.1").client_settings()
    assert plain.url == "http://127.0.0.1:9201" and plain.user is None


# ---- processes --------------------------------------------------------------------------
def test_status_of_a_port_nobody_listens_on(tmp_path: Path) -> None:
    node = DevNode(Settings(dev_home=tmp_path, dev_port=9, _env_file=None))
    st = node.status()
    assert st.running is False and st.pid is None
    assert node.down() is False  # nothing was started: nothing is killed


def test_cluster_status_and_down_with_nothing_running(tmp_path: Path) -> None:
    c = DevCluster(_settings(tmp_path), version="2.19.1", nodes=2)
    st = c.status()
    assert not st.running and st.number_of_nodes == 0 and [n.running for n in st.nodes] == [False, False]
    assert c.down() == [] and c.stop_node(2) is False


def test_last_error_line_strips_colour_and_prefers_errors() -> None:
    text = "info line\n\x1b[1;31mERROR\x1b[m could not find artifact\ntrailing noise\n"
    assert _last_error_line(text) == "ERROR could not find artifact"


def test_one_pom_fetches_every_artifact_and_nothing_transitive() -> None:
    import xml.etree.ElementTree as ET

    from osrag.devnode.plan import fetch_pom

    arts = artifacts("2.19.1") + [j for m in missing_modules("2.19.1") for j in m.jars]
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    deps = ET.fromstring(fetch_pom(arts)).findall("m:dependencies/m:dependency", ns)
    got = [
        ":".join(d.find(f"m:{k}", ns).text for k in ("groupId", "artifactId", "version", "type"))  # type: ignore[union-attr]
        for d in deps
    ]
    assert got == [a.coordinate for a in arts]
    assert all(d.find("m:exclusions/m:exclusion/m:artifactId", ns).text == "*" for d in deps)  # type: ignore[union-attr]


def test_a_pid_file_being_written_is_not_an_exit(tmp_path: Path) -> None:
    import os

    from osrag.devnode import process

    pid_file = tmp_path / "node.pid"
    assert not process.exited(pid_file)  # no file yet: the JVM has not written it
    pid_file.write_text("")  # created, not yet written (a starting JVM, read at that moment)
    assert not process.exited(pid_file)
    pid_file.write_text(str(os.getpid()))
    assert not process.exited(pid_file)
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    pid_file.write_text(str(child))  # a process that is gone
    assert process.exited(pid_file)
