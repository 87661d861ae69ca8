"""The OpenSearch client: built lazily, once, with errors translated.

Nothing here touches the network at import or construction; the first call
that needs the cluster does, and an unreachable cluster becomes a one-line
``ClusterUnavailable`` rather than a transport traceback.

Authentication (``OSRAG_AUTH``) is decided here once, for the sync and the async client
alike: ``none``, ``basic`` (user and password), ``sigv4`` (AWS request signing with
opensearch-py's signers, credentials from the standard AWS chain; the ``aws`` extra),
``cert`` (a client certificate and key, mTLS) or ``header`` (``OSRAG_AUTH_HEADER`` sent
as the ``Authorization`` header). No secret is put anywhere a log line or an error could
show it: the header value and the password stay in ``SecretStr`` until the transport
needs them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit

from osrag.errors import ClusterError, ClusterUnavailable, ConfigError
from osrag.settings import ConnectionSettings, Settings
from osrag.settings_checks import redact_url

T = TypeVar("T")


def aws_credentials() -> Any:
    """Credentials from the standard AWS chain (environment, shared files and profile, SSO, the
    container or instance role), as boto3 resolves them; a ``ConfigError`` when there are none."""
    try:
        import boto3
    except ImportError as exc:
        raise ConfigError("OSRAG_AUTH=sigv4 needs boto3: pip install 'osrag[aws]'") from exc
    creds = boto3.Session().get_credentials()
    if creds is None:
        raise ConfigError(
            "OSRAG_AUTH=sigv4 found no AWS credentials (environment, ~/.aws profile or instance role)"
        )
    return creds


class _MaskSessionToken(logging.Filter):
    """botocore logs each canonical request at DEBUG, and a signed request's canonical form holds
    ``x-amz-security-token:<the session token>``: the token is masked before any handler sees it."""

    _TOKEN = re.compile(r"(x-amz-security-token[:=]\s*)[^\s&]+", re.IGNORECASE)

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        masked = self._TOKEN.sub(r"\1***", text)
        if masked != text:
            record.msg, record.args = masked, ()
        return True


_MASK = _MaskSessionToken()


class AsyncSigner:
    """The async SigV4 signer under both ways opensearch-py's aiohttp connection calls it.

    3.1 and later call ``auth(method=, url=, body=, headers=)``. 3.0 -- the line the core install
    pins, as 3.1 pulls in grpcio and protobuf for a transport osrag never uses -- calls
    ``auth(method, url, query_string, body)`` positionally, so its own signer hashes the query
    string as the body and a SigV4 endpoint refuses every request that has one. Its ``url`` already
    holds the query string, so the third argument is dropped and the body passed as the body.
    """

    def __init__(self, inner: Callable[..., dict[str, str]]) -> None:
        self.inner = inner

    def __call__(self, method: str, url: str, *positional: Any, **named: Any) -> dict[str, str]:
        if positional:  # opensearch-py 3.0: (method, url, query_string, body)
            body = positional[1] if len(positional) > 1 else named.get("body")
            return self.inner(method, url, body, None)
        return self.inner(method=method, url=url, body=named.get("body"), headers=named.get("headers"))


def _signer(settings: ConnectionSettings, asynchronous: bool) -> Any:
    """opensearch-py's SigV4 signer for the transport in use (urllib3 for sync, aiohttp for async)."""
    creds = aws_credentials()
    botocore_auth = logging.getLogger("botocore.auth")
    if _MASK not in botocore_auth.filters:  # a filter, not a handler: where records go stays the app's
        botocore_auth.addFilter(_MASK)
    region = settings.effective_aws_region
    if asynchronous:
        from opensearchpy.helpers.asyncsigner import AWSV4SignerAsyncAuth

        return AsyncSigner(AWSV4SignerAsyncAuth(creds, region, settings.aws_service))  # type: ignore[arg-type]  # the settings' check requires a region
    from opensearchpy.helpers.signer import Urllib3AWSV4SignerAuth

    return Urllib3AWSV4SignerAuth(creds, region, settings.aws_service)


def auth_options(settings: ConnectionSettings, asynchronous: bool = False) -> dict[str, Any]:
    """The client options of the authentication mode in force (``Settings.auth_mode``)."""
    mode = settings.auth_mode
    if mode == "basic":
        return {"http_auth": settings.credentials()}
    if mode == "sigv4":
        if asynchronous:  # the default AIOHttpConnection takes basic auth only; this one calls the signer
            from opensearchpy import AsyncHttpConnection

            return {"http_auth": _signer(settings, True), "connection_class": AsyncHttpConnection}
        return {"http_auth": _signer(settings, False)}
    if mode == "cert":
        return {"client_cert": str(settings.client_cert), "client_key": str(settings.client_key)}
    if mode == "header":
        assert settings.auth_header is not None  # the settings validator guarantees it
        return {"headers": {settings.auth_header_name: settings.auth_header.get_secret_value()}}
    return {}


def client_options(settings: ConnectionSettings, asynchronous: bool = False) -> dict[str, Any]:
    """The connection options both clients (sync and async) are built with."""
    return dict(
        # user-info kept out of the transport: its logs and errors show hosts. Several hosts (OSRAG_HOSTS):
        # the transport round-robins and, when a node stops answering, marks it dead and retries elsewhere.
        hosts=settings.host_urls,
        verify_certs=settings.tls_verify,
        ssl_show_warn=settings.tls_verify,
        ca_certs=str(settings.ca_certs) if settings.ca_certs else None,
        timeout=settings.timeout_s,
        max_retries=settings.max_retries,
        retry_on_timeout=True,
        retry_on_status=(429, 502, 503, 504),
        http_compress=settings.http_compress,
        serializer=_serializer(),
        # The sync client's answers reach orjson as bytes (osrag.jsonio.OrjsonConnection); an
        # authentication mode that needs its own connection class still sets it below.
        **({} if asynchronous else {"connection_class": _connection_class()}),
        **auth_options(settings, asynchronous),
    )


def _serializer() -> Any:
    """orjson through opensearch-py's serializer hook (osrag.jsonio): faster request and answer JSON."""
    from osrag.jsonio import OrjsonSerializer

    return OrjsonSerializer()


def _connection_class() -> Any:
    from osrag.jsonio import OrjsonConnection

    return OrjsonConnection


def make_client(settings: ConnectionSettings) -> Any:
    """An ``OpenSearch`` client for these settings (no request is sent)."""
    from opensearchpy import OpenSearch

    return OpenSearch(**client_options(settings))


def make_async_client(settings: ConnectionSettings) -> Any:
    """An ``AsyncOpenSearch`` client (aiohttp; the ``async`` extra) for these settings (no request is sent)."""
    try:
        from opensearchpy import AsyncOpenSearch
    except ImportError as exc:  # opensearch-py exports it only when aiohttp is installed
        raise ConfigError("AsyncSearchClient needs aiohttp: pip install 'osrag[async]'") from exc
    return AsyncOpenSearch(**client_options(settings, asynchronous=True))


@contextmanager
def translate_errors(url: str, what: str = "request") -> Iterator[None]:
    """Turn transport exceptions into osrag's named errors (the URL shown without its password)."""
    from opensearchpy import exceptions as ose

    shown = redact_url(url)
    try:
        yield
    except ose.ConnectionError as exc:
        why, fix = unreachable_reason(exc)
        raise ClusterUnavailable(f"cannot reach OpenSearch at {shown}: {_unsecret(why, url)}", fix) from exc
    except ose.AuthenticationException as exc:
        raise ClusterError(f"OpenSearch at {shown} refused the credentials for {what}") from exc
    except ose.AuthorizationException as exc:
        raise ClusterError(
            f"OpenSearch at {shown} refused {what} (403): {_unsecret(_reason(exc), url)}"
        ) from exc
    except ose.TransportError as exc:
        raise ClusterError(f"OpenSearch {what} failed: {_unsecret(_reason(exc), url)}") from exc


def _unsecret(text: str, url: str) -> str:
    """Mask the URL's password wherever a library message might echo it."""
    try:
        password = urlsplit(url).password
    except ValueError:
        return text
    return text.replace(password, "***") if password else text


_START_IT = "start it (`osrag dev up` for a local node) or point OSRAG_URL at it"


def unreachable_reason(exc: BaseException) -> tuple[str, str]:
    """Why a connection failed and what to do, from the innermost cause a person can act on
    (refused, name not resolved, TLS, timeout) rather than the transport's nested reprs."""
    import socket
    import ssl

    chain: list[BaseException] = []
    node: BaseException | None = exc
    while node is not None and node not in chain and len(chain) < 10:
        chain.append(node)
        node = node.__cause__ or node.__context__
    for cause in reversed(chain):  # innermost first: the OS-level error says the most
        if isinstance(cause, ssl.SSLCertVerificationError):
            return "its TLS certificate is not trusted", "set OSRAG_CA_CERTS to the CA that signed it"
        if isinstance(cause, ssl.SSLError):
            return "the TLS handshake failed", "check http vs https in OSRAG_URL"
        if isinstance(cause, socket.gaierror):
            return "the host name does not resolve", "check the host in OSRAG_URL"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused", _START_IT
        if isinstance(cause, TimeoutError) or type(cause).__name__ in (
            "ConnectionTimeout",
            "ReadTimeoutError",
        ):
            return "no answer in time", "check the network, or raise OSRAG_TIMEOUT_S"
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror.lower(), _START_IT
    return _short(exc if isinstance(exc, Exception) else Exception(str(exc))), _START_IT


def _short(exc: Exception) -> str:
    text = str(exc.__cause__ or exc)
    if not text:
        return type(exc).__name__
    line = text.splitlines()[0]
    return line if len(line) <= 240 else line[:240].rsplit(" ", 1)[0] + " …"


def _reason(exc: Any) -> str:
    info = getattr(exc, "info", None)
    if isinstance(info, dict) and not info.get("error") and (info.get("message") or info.get("Message")):
        # AWS (a refused signature, a missing IAM permission) answers {"message": "..."}
        return " ".join(str(info.get("message") or info.get("Message")).split())[:300]
    if isinstance(info, dict):
        err = info.get("error")
        if isinstance(err, dict):
            root = (err.get("root_cause") or [err])[0]
            return f"{exc.status_code} {root.get('type')}: {root.get('reason')}"
        if err:
            return f"{exc.status_code} {err}"
    return f"{getattr(exc, 'status_code', '?')} {getattr(exc, 'error', exc)}"


class Cluster:
    """A thin lazy wrapper: one client per settings object, errors translated."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._client: Any | None = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client(self.settings)
        return self._client

    def call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with translate_errors(self.settings.url, what):
            return fn(*args, **kwargs)

    # Serverless has no cluster-level APIs (``GET /``, ``_cluster/health``, ``_cat/plugins``): what
    # they would tell is answered for it without a request, marked as not applicable.
    def info(self) -> dict[str, Any]:
        if self.settings.serverless:
            return {"version": {"number": "serverless", "distribution": "opensearch-serverless"}}
        return self.call("info", self.client.info)

    def health(self) -> dict[str, Any]:
        if self.settings.serverless:
            return {"status": "n/a (Serverless)"}
        return self.call("cluster health", self.client.cluster.health)

    def plugins(self) -> list[dict[str, Any]]:
        if self.settings.serverless:
            return []
        return self.call("cat plugins", self.client.cat.plugins, format="json")
