"""Certificates, users and the admin password of the secured local node.

Everything is generated on this machine at first start: a CA, a node
certificate (TLS on HTTP and transport, SAN 127.0.0.1/localhost) and an admin
client certificate, all signed by that CA; an ``admin`` user whose random
password is written to a 0600 file and only ever read from there. No demo
certificate or demo password of the plugin is used.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from osrag.devnode.plan import ADMIN_USER
from osrag.errors import LauncherError

ORG = "osrag dev"
NODE_CN = "osrag-node"
ADMIN_CN = "osrag-admin"
CERT_DAYS = 3650


@dataclass(frozen=True)
class CertSet:
    """PEM bytes of a CA and the certificates it signed; the DNs the plugin is told about."""

    ca_cert: bytes
    ca_key: bytes
    node_cert: bytes
    node_key: bytes
    admin_cert: bytes
    admin_key: bytes
    node_dn: str
    admin_dn: str


def _crypto():
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError as exc:
        raise LauncherError(
            "the secured dev node needs the `cryptography` package: pip install 'osrag[dev]'"
        ) from exc
    return x509, hashes, serialization, rsa, ExtendedKeyUsageOID, NameOID


def generate_certs(now: dt.datetime | None = None) -> CertSet:
    """A fresh CA, node and admin certificate (RSA 2048, SHA-256), keys in PKCS#8 as the plugin needs."""
    x509, hashes, serialization, rsa, eku, oid = _crypto()
    now = now or dt.datetime.now(dt.UTC)

    def key():
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def name(cn: str):
        return x509.Name(
            [x509.NameAttribute(oid.ORGANIZATION_NAME, ORG), x509.NameAttribute(oid.COMMON_NAME, cn)]
        )

    def pem_key(k) -> bytes:
        return k.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def builder(subject, issuer, pub):
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(pub)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=CERT_DAYS))
        )

    ca_key = key()
    ca_name = name("osrag dev CA")
    ca_cert = (
        builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(cn: str, usages: list, san: bool):
        k = key()
        b = (
            builder(name(cn), ca_name, k.public_key())
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=True,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
            )
        )
        if san:
            b = b.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        cert = b.sign(ca_key, hashes.SHA256())
        return cert, k

    node_cert, node_key = leaf(NODE_CN, [eku.SERVER_AUTH, eku.CLIENT_AUTH], san=True)
    admin_cert, admin_key = leaf(ADMIN_CN, [eku.CLIENT_AUTH], san=False)
    pem = serialization.Encoding.PEM
    return CertSet(
        ca_cert=ca_cert.public_bytes(pem),
        ca_key=pem_key(ca_key),
        node_cert=node_cert.public_bytes(pem),
        node_key=pem_key(node_key),
        admin_cert=admin_cert.public_bytes(pem),
        admin_key=pem_key(admin_key),
        # RFC 4514 puts the most specific part first, as the plugin's DN matching expects.
        node_dn=node_cert.subject.rfc4514_string(),
        admin_dn=admin_cert.subject.rfc4514_string(),
    )


def issue_client_cert(ca_cert_pem: bytes, ca_key_pem: bytes, cn: str) -> tuple[bytes, bytes, str]:
    """A client certificate for ``cn`` signed by the dev CA: (cert PEM, PKCS#8 key PEM, its DN).

    The security plugin's ``clientcert`` authenticator takes the DN as the user name, so a
    role mapping that lists this DN as a user is what gives the certificate its rights."""
    x509, hashes, serialization, rsa, eku, oid = _crypto()
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    now = dt.datetime.now(dt.UTC)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name(
        [x509.NameAttribute(oid.ORGANIZATION_NAME, ORG), x509.NameAttribute(oid.COMMON_NAME, cn)]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=CERT_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([eku.CLIENT_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem, cert.subject.rfc4514_string()


def config_yml() -> str:
    """Two HTTP authenticators: a client certificate signed by the dev CA (the user is the
    certificate's DN; no password), then basic auth against the internal users."""
    doc = {
        "_meta": {"type": "config", "config_version": 2},
        "config": {
            "dynamic": {
                "http": {"anonymous_auth_enabled": False},
                "authc": {
                    "clientcert_auth_domain": {
                        "description": "a client certificate signed by the dev CA; user = its DN",
                        "http_enabled": True,
                        "transport_enabled": False,
                        "order": 0,
                        "http_authenticator": {"type": "clientcert", "challenge": False},
                        "authentication_backend": {"type": "noop"},
                    },
                    "basic_internal_auth_domain": {
                        "description": "user and password of the internal user database",
                        "http_enabled": True,
                        "transport_enabled": True,
                        "order": 1,
                        "http_authenticator": {"type": "basic", "challenge": True},
                        "authentication_backend": {"type": "intern"},
                    },
                },
            }
        },
    }
    return _yml(doc)


def new_password() -> str:
    """A random admin password: 32 URL-safe characters plus the classes strength rules ask for."""
    return secrets.token_urlsafe(24) + "Aa1!"


def bcrypt_hash(password: str) -> str:
    """The hash the plugin's internal user database stores ($2a$, cost 12)."""
    try:
        import bcrypt
    except ImportError as exc:
        raise LauncherError(
            "the secured dev node needs the `bcrypt` package: pip install 'osrag[dev]'"
        ) from exc
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=12, prefix=b"2a")).decode()


def internal_users_yml(password_hash: str) -> str:
    """Only the admin user: the plugin's demo users (with published passwords) are not kept."""
    doc = {
        "_meta": {"type": "internalusers", "config_version": 2},
        ADMIN_USER: {
            "hash": password_hash,
            "reserved": True,
            "backend_roles": ["admin"],
            "description": "osrag dev admin; password in the node's admin-password file",
        },
    }
    return _yml(doc)


def roles_mapping_yml() -> str:
    """admin gets all_access and the security REST API; other mappings are made through that API."""
    doc = {
        "_meta": {"type": "rolesmapping", "config_version": 2},
        "all_access": {"reserved": False, "users": [ADMIN_USER], "backend_roles": ["admin"]},
        "security_rest_api_access": {"reserved": False, "users": [ADMIN_USER]},
    }
    return _yml(doc)


def _yml(doc: dict[str, object]) -> str:
    # JSON is YAML; one top-level key per line keeps the file readable.
    return "".join(f"{k}: {json.dumps(v)}\n" for k, v in doc.items())


def write_private(path: Path, data: bytes) -> None:
    """Create ``path`` readable by its owner only, before any byte is written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
