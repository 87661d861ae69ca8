"""Who is asking an HTTP request: a verified JWT, a trusted gateway's headers, or nobody (public only).

Fail closed. The server knows one of three ways, chosen at start (``auth_from_settings``):

* **JWT** (``OSRAG_SERVE_JWT_KEY`` or ``..._KEY_FILE``): ``Authorization: Bearer <token>``,
  verified with the configured key and exactly the configured algorithm (HS* with a shared secret
  of at least the hash's length, RS*/ES*/PS* with the issuer's public key), ``exp`` required,
  ``aud``/``iss`` checked when configured. The groups come from one claim (a dotted path, e.g.
  ``realm_access.roles``), the tenant from another; a token without the groups claim proves who
  is asking but grants no group: public chunks only.
* **Gateway headers** (``OSRAG_SERVE_TRUST_GATEWAY_HEADERS`` / ``--trust-gateway-headers``): a
  gateway in front has authenticated the caller and says its groups (comma-separated) and tenant
  in two headers; with ``OSRAG_SERVE_GATEWAY_SECRET`` it must also send that secret, so a
  request that went around the gateway is refused. A request without the groups header did not
  come through the gateway: refused.
* **Public only** (``--public-only``): every request is ``PUBLIC``; no credential is read.

With none of these the server does not start. A token or secret is never logged or echoed: the
errors here name what is wrong with a credential, never its value. Pure: no I/O after start.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from osrag.access import PUBLIC, Principal
from osrag.errors import ConfigError, InputError
from osrag.settings import Settings
from osrag.vocabulary import JWT_ALGORITHMS, JwtAlgorithm

__all__ = [
    "GATEWAY_SECRET_HEADER",
    "Auth",
    "Forbidden",
    "GatewayHeaders",
    "JwtVerifier",
    "Unauthenticated",
    "auth_from_settings",
]

log = logging.getLogger(__name__)

#: The header a gateway sends the shared secret in (when ``OSRAG_SERVE_GATEWAY_SECRET`` is set).
GATEWAY_SECRET_HEADER = "x-osrag-gateway-secret"
#: A longer Authorization header is refused before any parsing.
MAX_TOKEN_CHARS = 16_384
#: JWT claims that are NumericDate (RFC 7519 2): a number of seconds, never text.
_TIME_CLAIMS = ("exp", "nbf", "iat")
#: HMAC keys shorter than the hash are refused at start (RFC 7518 3.2).
_HMAC_MIN_BYTES: dict[JwtAlgorithm, int] = {"HS256": 32, "HS384": 48, "HS512": 64}


class Unauthenticated(InputError):
    """No usable credential: the caller is not known (HTTP 401)."""


class Forbidden(InputError):
    """The caller is known, but what it carries cannot be made into a principal (HTTP 403)."""


def _claim(claims: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` (``realm_access.roles``), None when any step is missing."""
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _principal(groups: Any, tenant: Any, *, where: str, require_tenant: bool) -> Principal:
    """A principal from claim or header values; anything that is not names is ``Forbidden``."""
    if tenant is not None and not isinstance(tenant, str):
        raise Forbidden(f"{where}: the tenant is not text")
    if require_tenant and not tenant:
        raise Forbidden(f"{where}: no tenant, and this server requires one (OSRAG_REQUIRE_TENANT=true)")
    try:
        if not groups:
            return Principal.public(tenant=tenant or None)
        return Principal(groups=groups, tenant=tenant or None)
    except (InputError, ValueError) as exc:  # Principal says which value is not a name
        raise Forbidden(f"{where}: {str(exc).removeprefix('invalid Principal: ')}") from None


@dataclass(frozen=True)
class JwtVerifier:
    """Verifies a bearer token and maps its claims to a principal."""

    key: Any  # prepared by the algorithm (bytes for HMAC, a public key object otherwise)
    algorithm: JwtAlgorithm
    groups_claim: str = "groups"
    tenant_claim: str = "tenant"
    audience: str | None = None
    issuer: str | None = None
    leeway_s: float = 30.0
    require_tenant: bool = False

    @classmethod
    def from_key(cls, raw: str | bytes, algorithm: JwtAlgorithm, **kw: Any) -> JwtVerifier:
        """Checks and prepares ``raw`` once, at start: a bad or weak key stops the server there."""
        import jwt

        if algorithm not in JWT_ALGORITHMS:  # the settings allow no other; a caller in code might
            raise ConfigError(f"JWT algorithm {algorithm} is not one of {', '.join(JWT_ALGORITHMS)}")
        try:
            alg = jwt.get_algorithm_by_name(algorithm)
        except NotImplementedError as exc:
            raise ConfigError(
                f"JWT algorithm {algorithm} is not available (pip install 'pyjwt[crypto]')"
            ) from exc
        minimum = _HMAC_MIN_BYTES.get(algorithm)
        # A key file's final line break is not part of the key.
        data = (raw.encode() if isinstance(raw, str) else raw).rstrip(b"\r\n")
        if minimum is not None and len(data) < minimum:
            raise ConfigError(f"the {algorithm} key is {len(data)} bytes; at least {minimum} are needed")
        try:
            key = alg.prepare_key(data)
        except Exception as exc:  # InvalidKeyError, ValueError from cryptography's PEM loader
            raise ConfigError(
                f"the JWT key is not a usable {algorithm} key"
                + (" (an RS/ES/PS key is the issuer's public key in PEM)" if minimum is None else "")
            ) from exc
        if minimum is None and hasattr(key, "private_numbers"):
            raise ConfigError("the JWT key is a private key: give the server the issuer's public key only")
        return cls(key=key, algorithm=algorithm, **kw)

    def claims(self, token: str) -> dict[str, Any]:
        """The verified claims, or ``Unauthenticated`` saying why (never the token)."""
        import jwt

        required = ["exp", *(["aud"] if self.audience else []), *(["iss"] if self.issuer else [])]
        try:
            return dict(
                jwt.decode(
                    token,
                    self.key,
                    algorithms=[self.algorithm],
                    audience=self.audience,
                    issuer=self.issuer,
                    leeway=self.leeway_s,
                    options={"require": required},
                )
            )
        except jwt.ExpiredSignatureError:
            raise Unauthenticated("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise Unauthenticated("the token is not valid yet (nbf/iat in the future)") from None
        except jwt.MissingRequiredClaimError as exc:
            raise Unauthenticated(f"the token has no {exc.claim!r} claim") from None
        except jwt.InvalidAudienceError:
            raise Unauthenticated("the token is not for this audience") from None
        except jwt.InvalidIssuerError:
            raise Unauthenticated("the token is not from the configured issuer") from None
        except jwt.InvalidAlgorithmError:
            raise Unauthenticated(f"the token is not signed with {self.algorithm}") from None
        except jwt.InvalidSignatureError:
            raise Unauthenticated("the token's signature does not verify") from None
        except jwt.InvalidTokenError:  # DecodeError and the rest: say nothing of the content
            raise Unauthenticated("the token is malformed") from None

    def checked_claims(self, token: str) -> dict[str, Any]:
        """``claims``, with the time claims numbers as RFC 7519 says: PyJWT reads ``"exp": "9999999999"``
        as a number, and a string where a number belongs is a token nobody should have signed."""
        claims = self.claims(token)
        for name in _TIME_CLAIMS:
            value = claims.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise Unauthenticated(f"the token's {name!r} claim is not a number")
        return claims

    def principal(self, token: str) -> Principal:
        claims = self.checked_claims(token)
        groups = _claim(claims, self.groups_claim)
        if isinstance(groups, str):  # one group as a bare name; "a b" or "a,b" fails as not a name
            groups = [groups]
        if groups is not None and not isinstance(groups, list):
            raise Forbidden(f"token claim {self.groups_claim!r} is not a list of group names")
        tenant = _claim(claims, self.tenant_claim)
        where = f"token claims {self.groups_claim!r}/{self.tenant_claim!r}"
        return _principal(groups or [], tenant, where=where, require_tenant=self.require_tenant)

    def describe(self) -> str:
        checks = ", ".join(
            x
            for x in (
                f"aud={self.audience}" if self.audience else "",
                f"iss={self.issuer}" if self.issuer else "",
            )
            if x
        )
        return (
            f"JWT {self.algorithm}{f' ({checks})' if checks else ''}, groups from claim {self.groups_claim!r}, "
            f"tenant from {self.tenant_claim!r}"
        )


@dataclass(frozen=True)
class GatewayHeaders:
    """Trusts a gateway's headers: groups (comma-separated; present but empty = no group) and tenant."""

    groups_header: str = "x-osrag-groups"
    tenant_header: str = "x-osrag-tenant"
    secret: bytes | None = None
    require_tenant: bool = False

    def principal(self, headers: Mapping[str, str]) -> Principal:
        if self.secret is not None:
            given = headers.get(GATEWAY_SECRET_HEADER)
            if given is None or not hmac.compare_digest(given.encode(), self.secret):
                raise Unauthenticated(
                    "the request did not come through the trusted gateway (secret missing or wrong)"
                )
        raw = headers.get(self.groups_header)
        if raw is None:
            raise Unauthenticated(
                f"no credentials: neither a bearer token nor the gateway's {self.groups_header} header"
            )
        groups = [g.strip() for g in raw.split(",") if g.strip()]
        tenant = headers.get(self.tenant_header)
        where = f"gateway headers {self.groups_header}/{self.tenant_header}"
        return _principal(
            groups, tenant.strip() if tenant else None, where=where, require_tenant=self.require_tenant
        )

    def describe(self) -> str:
        return f"gateway headers {self.groups_header}/{self.tenant_header}" + (
            ", shared secret required" if self.secret is not None else ", NO shared secret"
        )


@dataclass(frozen=True)
class Auth:
    """The server's way of knowing who asks. ``principal(headers)`` for each request (headers
    looked up by lower-case name)."""

    jwt: JwtVerifier | None = None
    gateway: GatewayHeaders | None = None
    public_only: bool = False

    def __post_init__(self) -> None:
        if self.public_only and (self.jwt or self.gateway):
            raise ConfigError(
                "--public-only serves public chunks to everyone: it takes no JWT key and no gateway headers"
            )
        if not (self.public_only or self.jwt or self.gateway):
            raise ConfigError(
                "no way to know who is asking: set OSRAG_SERVE_JWT_KEY (or OSRAG_SERVE_JWT_KEY_FILE), "
                "or --trust-gateway-headers behind a gateway, or serve public chunks only with --public-only"
            )

    @property
    def bearer(self) -> bool:
        return self.jwt is not None

    def identity_headers(self) -> tuple[str, ...]:
        """The headers this server reads a caller's identity from (lower case)."""
        names = ["authorization"] if self.jwt is not None else []
        if self.gateway is not None:
            names += [self.gateway.groups_header, self.gateway.tenant_header, GATEWAY_SECRET_HEADER]
        return tuple(names)

    def principal(self, headers: Mapping[str, str]) -> Principal:
        if self.public_only:
            return PUBLIC
        _no_repeated(headers, self.identity_headers())
        header = headers.get("authorization")
        if header is not None and self.jwt is not None:
            if len(header) > MAX_TOKEN_CHARS:
                raise Unauthenticated("the Authorization header is too long")
            scheme, _, token = header.strip().partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Unauthenticated("the Authorization header must be 'Bearer <token>'")
            return self.jwt.principal(token.strip())
        gw = self.gateway
        if gw is not None and (
            gw.groups_header in headers or GATEWAY_SECRET_HEADER in headers or self.jwt is None
        ):
            return gw.principal(headers)
        ways = ["'Authorization: Bearer <token>'"] if self.jwt is not None else []
        ways += ["the trusted gateway's headers"] if gw is not None else []
        raise Unauthenticated("no credentials: send " + " or come with ".join(ways))

    def describe(self) -> str:
        """For the start-up log line: how callers are known (never a key)."""
        if self.public_only:
            return "public only: every request sees public chunks only"
        return " or ".join(x.describe() for x in (self.jwt, self.gateway) if x is not None)


def _no_repeated(headers: Mapping[str, str], names: tuple[str, ...]) -> None:
    """An identity header given twice is refused: which copy is the gateway's is a guess (a gateway
    that appends rather than replaces would let the client's own copy win)."""
    getlist = getattr(headers, "getlist", None)
    if getlist is None:  # a plain mapping holds one value per name
        return
    for name in names:
        count = len(getlist(name))
        if count > 1:
            raise InputError(f"header {name} is given {count} times; an identity header must be given once")


def auth_from_settings(s: Settings) -> Auth:
    """The ``Auth`` the settings describe; a missing, weak or contradictory setup is a ``ConfigError``."""
    verifier = None
    key: str | bytes | None = s.serve_jwt_key.get_secret_value() if s.serve_jwt_key is not None else None
    if s.serve_jwt_key_file is not None:
        if key is not None:
            raise ConfigError("OSRAG_SERVE_JWT_KEY and OSRAG_SERVE_JWT_KEY_FILE are both set; keep one")
        try:
            key = s.serve_jwt_key_file.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"cannot read OSRAG_SERVE_JWT_KEY_FILE {s.serve_jwt_key_file}: {exc.strerror}"
            ) from exc
    if key is not None:
        verifier = JwtVerifier.from_key(
            key,
            s.serve_jwt_algorithm,
            groups_claim=s.serve_jwt_groups_claim,
            tenant_claim=s.serve_jwt_tenant_claim,
            audience=s.serve_jwt_audience,
            issuer=s.serve_jwt_issuer,
            leeway_s=s.serve_jwt_leeway_s,
            require_tenant=s.require_tenant,
        )
    gateway = None
    if s.serve_trust_gateway_headers:
        gateway = GatewayHeaders(
            groups_header=s.serve_gateway_groups_header.lower(),
            tenant_header=s.serve_gateway_tenant_header.lower(),
            secret=s.serve_gateway_secret.get_secret_value().encode() if s.serve_gateway_secret else None,
            require_tenant=s.require_tenant,
        )
        if gateway.secret is None:
            log.warning(
                "trusting gateway headers without OSRAG_SERVE_GATEWAY_SECRET: anyone who reaches this port "
                "directly can claim any group; bind it where only the gateway can"
            )
    if s.serve_public_only and s.require_tenant:
        raise ConfigError(
            "--public-only names no tenant, and OSRAG_REQUIRE_TENANT=true refuses every read without one"
        )
    return Auth(jwt=verifier, gateway=gateway, public_only=s.serve_public_only)
