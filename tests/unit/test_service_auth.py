"""Who is asking the HTTP service (osrag.service.auth): JWT (HS256, RS256), gateway headers, public only.

Real PyJWT and real keys (an RSA pair made here); no server. Every refusal is checked for its
kind (401 vs 403) and for not echoing the credential.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import pytest

jwt = pytest.importorskip("jwt")
pytest.importorskip("fastapi")

from click.testing import CliRunner  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402

from osrag.access import PUBLIC, Principal  # noqa: E402
from osrag.errors import ConfigError  # noqa: E402
from osrag.service.auth import (  # noqa: E402
    Auth,
    Forbidden,
    GatewayHeaders,
    JwtVerifier,
    Unauthenticated,
    auth_from_settings,
)
from osrag.settings import Settings  # noqa: E402

SECRET = "s3cret-" + "x" * 60


def token(claims: dict[str, Any], key: Any = SECRET, alg: str = "HS256", exp: float | None = 300) -> str:
    body = dict(claims)
    if exp is not None:
        body["exp"] = int(time.time() + exp)
    return jwt.encode(body, key, algorithm=alg)


def hs256_signed_with(secret: bytes, claims: dict[str, Any]) -> str:
    """A token signed by hand (PyJWT refuses a PEM as an HMAC secret, an attacker does not)."""

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps({**claims, "exp": int(time.time()) + 60}).encode())
    sig = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(sig)}"


def bearer(tok: str) -> dict[str, str]:
    return {"authorization": f"Bearer {tok}"}


@pytest.fixture(scope="module")
def rsa_pair() -> tuple[Any, bytes]:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public_pem


@pytest.fixture
def hs() -> Auth:
    return Auth(jwt=JwtVerifier.from_key(SECRET, "HS256"))


def refused(auth: Auth, headers: dict[str, str], kind: type[Exception], *words: str) -> str:
    with pytest.raises(kind) as got:
        auth.principal(headers)
    msg = str(got.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg
    for value in headers.values():  # the credential is never echoed
        secret = value.split()[-1] if value.split() else ""
        assert len(secret) < 8 or secret not in msg
    return msg


def test_hs256_groups_and_tenant_become_the_principal(hs: Auth) -> None:
    who = hs.principal(bearer(token({"sub": "u1", "groups": ["staff", "support"], "tenant": "acme"})))
    assert who == Principal(groups=["staff", "support"], tenant="acme")


def test_a_token_without_groups_sees_public_chunks_only(hs: Auth) -> None:
    who = hs.principal(bearer(token({"sub": "u1"})))
    assert who.public_only and not who.groups and not who.all_access


def test_one_group_as_a_bare_name(hs: Auth) -> None:
    assert hs.principal(bearer(token({"groups": "staff"}))).groups == ("staff",)


@pytest.mark.parametrize(
    ("headers", "words"),
    [
        ({}, ("no credentials",)),
        ({"authorization": "Basic dXNlcjpwYXNz"}, ("Bearer",)),
        ({"authorization": "Bearer"}, ("Bearer",)),
        ({"authorization": "Bearer not-a-jwt"}, ("malformed",)),
        ({"authorization": "Bearer " + "a" * 20_000}, ("too long",)),
    ],
)
def test_missing_or_malformed_credentials_are_401(
    hs: Auth, headers: dict[str, str], words: tuple[str]
) -> None:
    refused(hs, headers, Unauthenticated, *words)


def test_bad_signature_expired_and_no_exp_are_401(hs: Auth) -> None:
    refused(hs, bearer(token({"groups": ["staff"]}, key="other-" + "y" * 40)), Unauthenticated, "signature")
    refused(hs, bearer(token({"groups": ["staff"]}, exp=-3600)), Unauthenticated, "expired")
    refused(hs, bearer(token({"groups": ["staff"]}, exp=None)), Unauthenticated, "'exp'")


def test_alg_none_and_other_algorithms_are_refused(hs: Auth) -> None:
    unsigned = jwt.encode({"groups": ["staff"], "exp": int(time.time()) + 60}, None, algorithm="none")
    refused(hs, bearer(unsigned), Unauthenticated)
    hs512 = token({"groups": ["staff"]}, key=SECRET, alg="HS512")
    refused(hs, bearer(hs512), Unauthenticated, "HS256")


def test_claims_that_are_not_names_are_403(hs: Auth) -> None:
    refused(hs, bearer(token({"groups": 5})), Forbidden, "'groups'")
    refused(hs, bearer(token({"groups": ["two words"]})), Forbidden, "not a group name")
    refused(hs, bearer(token({"groups": ["staff"], "tenant": ["acme"]})), Forbidden, "tenant")


def test_audience_issuer_and_a_nested_groups_claim() -> None:
    auth = Auth(
        jwt=JwtVerifier.from_key(
            SECRET, "HS256", audience="osrag", issuer="https://idp.example", groups_claim="realm_access.roles"
        )
    )
    good = {"aud": "osrag", "iss": "https://idp.example", "realm_access": {"roles": ["staff"]}}
    assert auth.principal(bearer(token(good))).groups == ("staff",)
    refused(auth, bearer(token({**good, "aud": "other"})), Unauthenticated, "audience")
    refused(auth, bearer(token({**good, "iss": "https://evil.example"})), Unauthenticated, "issuer")
    no_aud = {k: v for k, v in good.items() if k != "aud"}
    refused(auth, bearer(token(no_aud)), Unauthenticated, "'aud'")


def test_require_tenant_refuses_a_token_without_one() -> None:
    auth = Auth(jwt=JwtVerifier.from_key(SECRET, "HS256", require_tenant=True))
    refused(auth, bearer(token({"groups": ["staff"]})), Forbidden, "OSRAG_REQUIRE_TENANT")
    assert auth.principal(bearer(token({"groups": ["staff"], "tenant": "acme"}))).tenant == "acme"


def test_rs256_with_the_public_key(rsa_pair: tuple[Any, bytes]) -> None:
    private, public_pem = rsa_pair
    auth = Auth(jwt=JwtVerifier.from_key(public_pem.decode(), "RS256"))
    assert auth.principal(bearer(token({"groups": ["staff"]}, key=private, alg="RS256"))).groups == ("staff",)
    # The classic confusion: an HS256 token whose HMAC secret is the public PEM, made by hand.
    refused(auth, bearer(hs256_signed_with(public_pem, {"groups": ["admins"]})), Unauthenticated, "RS256")
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused(auth, bearer(token({"groups": ["staff"]}, key=other, alg="RS256")), Unauthenticated, "signature")
    refused(auth, bearer(token({"groups": ["staff"]})), Unauthenticated, "RS256")  # HS256 token


def test_weak_private_or_wrong_keys_stop_the_start(rsa_pair: tuple[Any, bytes]) -> None:
    private, public_pem = rsa_pair
    with pytest.raises(ConfigError, match="at least 32"):
        JwtVerifier.from_key("short", "HS256")
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(ConfigError, match="private key"):
        JwtVerifier.from_key(private_pem, "RS256")
    with pytest.raises(ConfigError, match="not a usable RS256 key"):
        JwtVerifier.from_key("x" * 64, "RS256")
    with pytest.raises(ConfigError, match="not a usable HS256 key"):
        JwtVerifier.from_key(public_pem, "HS256")  # a PEM as an HMAC secret


def test_gateway_headers_with_a_shared_secret() -> None:
    auth = Auth(gateway=GatewayHeaders(secret=b"gw-secret-value"))
    ok = {
        "x-osrag-gateway-secret": "gw-secret-value",
        "x-osrag-groups": "staff, support",
        "x-osrag-tenant": "acme",
    }
    assert auth.principal(ok) == Principal(groups=["staff", "support"], tenant="acme")
    assert auth.principal({**ok, "x-osrag-groups": ""}).public_only
    refused(auth, {**ok, "x-osrag-gateway-secret": "guess"}, Unauthenticated, "gateway")
    refused(auth, {"x-osrag-groups": "staff"}, Unauthenticated, "gateway")
    no_groups = {"x-osrag-gateway-secret": "gw-secret-value"}
    refused(auth, no_groups, Unauthenticated, "x-osrag-groups")
    refused(auth, {**ok, "x-osrag-groups": "sta ff"}, Forbidden)


def test_jwt_and_gateway_together_bearer_first() -> None:
    auth = Auth(jwt=JwtVerifier.from_key(SECRET, "HS256"), gateway=GatewayHeaders())
    assert auth.principal(bearer(token({"groups": ["a"]}))).groups == ("a",)
    assert auth.principal({"x-osrag-groups": "b"}).groups == ("b",)
    # A bad token is refused even when gateway headers ride along.
    refused(auth, {**bearer("nope"), "x-osrag-groups": "b"}, Unauthenticated, "malformed")


def test_public_only_ignores_credentials() -> None:
    auth = Auth(public_only=True)
    assert auth.principal(bearer(token({"groups": ["staff"]}))) == PUBLIC
    assert auth.principal({}) == PUBLIC


def test_from_settings_needs_exactly_one_way(tmp_path: Any) -> None:
    with pytest.raises(ConfigError, match="no way to know who is asking"):
        auth_from_settings(Settings(_env_file=None))
    with pytest.raises(ConfigError, match="public-only"):
        auth_from_settings(Settings(serve_public_only=True, serve_jwt_key=SECRET, _env_file=None))
    with pytest.raises(ConfigError, match="OSRAG_REQUIRE_TENANT"):
        auth_from_settings(Settings(serve_public_only=True, require_tenant=True, _env_file=None))
    key = tmp_path / "key"
    key.write_text(SECRET + "\n")
    auth = auth_from_settings(Settings(serve_jwt_key_file=key, _env_file=None))
    assert auth.principal(bearer(token({"groups": ["x"]}))).groups == ("x",)  # the line break is not key
    with pytest.raises(ConfigError, match="both set"):
        auth_from_settings(Settings(serve_jwt_key_file=key, serve_jwt_key=SECRET, _env_file=None))
    gw = auth_from_settings(
        Settings(serve_trust_gateway_headers=True, serve_gateway_groups_header="X-Groups", _env_file=None)
    )
    assert gw.principal({"x-groups": "g"}).groups == ("g",)


def test_settings_never_show_the_secrets() -> None:
    s = Settings(serve_jwt_key=SECRET, serve_gateway_secret="gw-secret-value", _env_file=None)
    shown = f"{s!r} {s.redacted()}"
    assert SECRET not in shown and "gw-secret-value" not in shown


def test_describe_names_the_way_never_the_key() -> None:
    auth = Auth(jwt=JwtVerifier.from_key(SECRET, "HS256"), gateway=GatewayHeaders(secret=b"gw-secret-value"))
    text = auth.describe()
    assert "HS256" in text and "gateway" in text
    assert SECRET not in text and "gw-secret-value" not in text


def test_serve_refuses_to_start_without_a_way_to_know_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from osrag.cli import cli

    for var in list(os.environ):
        if var.startswith("OSRAG_SERVE_"):
            monkeypatch.delenv(var)
    monkeypatch.chdir(os.path.dirname(__file__))  # no .env here
    result = CliRunner().invoke(cli, ["serve", "--port", "1"])
    assert result.exit_code != 0
    assert isinstance(result.exception, ConfigError)
    assert "--public-only" in str(result.exception)
