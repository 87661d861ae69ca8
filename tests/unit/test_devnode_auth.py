"""The secured dev node's client-certificate authentication: settings, config.yml, issued certificates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from osrag.devnode import security as sec
from osrag.devnode.plan import security_settings


def test_http_client_certificates_are_optional_and_authenticated_before_basic() -> None:
    s = security_settings(admin_dn="CN=a", node_dn="CN=n")
    assert s["plugins.security.ssl.http.clientauth_mode"] == "OPTIONAL"
    doc = {k: json.loads(v) for k, v in (line.split(": ", 1) for line in sec.config_yml().splitlines())}
    authc = doc["config"]["dynamic"]["authc"]
    assert authc["clientcert_auth_domain"]["http_authenticator"]["type"] == "clientcert"
    assert authc["clientcert_auth_domain"]["order"] < authc["basic_internal_auth_domain"]["order"]
    assert (
        authc["clientcert_auth_domain"]["http_enabled"]
        and authc["basic_internal_auth_domain"]["http_enabled"]
    )
    assert doc["config"]["dynamic"]["http"]["anonymous_auth_enabled"] is False


def test_an_issued_client_certificate_chains_to_the_dev_ca_and_names_its_dn(tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import padding

    cs = sec.generate_certs()
    pem, key_pem, dn = sec.issue_client_cert(cs.ca_cert, cs.ca_key, "osrag-app")
    cert = x509.load_pem_x509_certificate(pem)
    ca = x509.load_pem_x509_certificate(cs.ca_cert)
    assert cert.issuer == ca.subject and dn == "CN=osrag-app,O=osrag dev"
    ca.public_key().verify(  # raises when the signature is not the CA's
        cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), cert.signature_hash_algorithm
    )
    other = sec.generate_certs()
    with pytest.raises(Exception):  # noqa: B017 -- InvalidSignature: another CA did not sign it
        x509.load_pem_x509_certificate(other.ca_cert).public_key().verify(
            cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), cert.signature_hash_algorithm
        )
    assert b"PRIVATE KEY" in key_pem and b"ENCRYPTED" not in key_pem
