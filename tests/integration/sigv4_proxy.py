"""A reverse proxy that plays an AWS endpoint: it VERIFIES each request's SigV4 signature.

It recomputes the signature with botocore from fixed test credentials (the canonical request
from the method, raw path and query, the headers the client listed as signed, and the body
hash it checked against the bytes that arrived), refuses a missing or wrong one with 403 and
AWS's kind of ``{"message": ...}`` body, and forwards what verifies to a real OpenSearch node.
Threaded ``http.server`` on 127.0.0.1 (HTTP/1.1, keep-alive), stopped by the fixture.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import http.client
import http.server
import json
import re
import threading
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

_AUTH = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<cred>[^,]+), ?SignedHeaders=(?P<signed>[^,]+), ?Signature=(?P<sig>[0-9a-f]{64})$"
)
#: Headers the proxy passes on to OpenSearch (what the body is; nothing of the signature).
_FORWARD = ("content-type", "content-encoding")


@dataclass(frozen=True)
class FixedCredentials:
    access_key: str = "AKIAOSRAGTEST0000001"
    secret_key: str = "osrag/test/secret/key/0123456789abcdefghij"
    token: str | None = "osrag-test-session-token"
    region: str = "eu-north-1"
    service: str = "es"


def verify(
    creds: FixedCredentials, method: str, host_url: str, raw_path: str, headers: dict[str, str], body: bytes
) -> str | None:
    """None when the request carries a valid signature by ``creds``; else why not (one line)."""
    h = {k.lower(): v for k, v in headers.items()}
    m = _AUTH.match(h.get("authorization", ""))
    if not m:
        return "missing or malformed SigV4 Authorization header"
    key, day, region, service, term = (m.group("cred").split("/") + [""] * 5)[:5]
    if key != creds.access_key:
        return "The security token included in the request is invalid (unknown access key)"
    if (region, service, term) != (creds.region, creds.service, "aws4_request"):
        return f"Credential should be scoped to {creds.region}/{creds.service}, not {region}/{service}"
    stamp = h.get("x-amz-date", "")
    try:
        when = dt.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return "missing or malformed X-Amz-Date"
    if abs((dt.datetime.now(dt.UTC) - when).total_seconds()) > 300 or not stamp.startswith(day):
        return "Signature expired or dated outside its credential scope"
    if creds.token is not None and h.get("x-amz-security-token") != creds.token:
        return "The security token included in the request is invalid"
    signed = m.group("signed").split(";")
    if "host" not in signed or "x-amz-date" not in signed:
        return "host and x-amz-date must be signed"
    declared = h.get("x-amz-content-sha256")
    if declared is not None and declared != hashlib.sha256(body).hexdigest():
        return "X-Amz-Content-SHA256 does not match the body"
    missing = [s for s in signed if s not in h]
    if missing:
        return f"signed header(s) {', '.join(missing)} absent"
    req = AWSRequest(method=method, url=host_url + raw_path, data=body, headers={s: h[s] for s in signed})
    req.context["timestamp"] = stamp
    auth = SigV4Auth(
        Credentials(creds.access_key, creds.secret_key, creds.token), creds.service, creds.region
    )
    expected = auth.signature(auth.string_to_sign(req, auth.canonical_request(req)), req)
    if not hmac.compare_digest(expected, m.group("sig")):
        return "The request signature we calculated does not match the signature you provided"
    return None


@dataclass
class SigV4Proxy:
    upstream: str
    creds: FixedCredentials = field(default_factory=FixedCredentials)
    verified: int = 0
    refused: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def start(self) -> str:
        proxy = self
        up = urlsplit(self.upstream)

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                host = self.headers.get("Host", "")
                why = verify(proxy.creds, self.command, f"http://{host}", self.path, dict(self.headers), body)
                if why is not None:
                    proxy.refused.append(f"{self.command} {self.path}: {why}")
                    self._reply(
                        403, {"content-type": "application/json"}, json.dumps({"message": why}).encode()
                    )
                    return
                proxy.verified += 1
                proxy.paths.append(f"{self.command} {self.path.split('?')[0]}")
                conn = http.client.HTTPConnection(up.hostname, up.port, timeout=120)
                try:
                    fwd = {k: v for k, v in self.headers.items() if k.lower() in _FORWARD}
                    conn.request(self.command, self.path, body=body or None, headers=fwd)
                    resp = conn.getresponse()
                    data = resp.read()
                    out = {
                        k.lower(): v
                        for k, v in resp.getheaders()
                        if k.lower() in ("content-type", "content-encoding")
                    }
                    if self.command == "HEAD":
                        out["content-length"] = resp.getheader("content-length") or "0"
                        self._reply(resp.status, out, b"", head=True)
                    else:
                        self._reply(resp.status, out, data)
                finally:
                    conn.close()

            def _reply(self, status: int, headers: dict[str, str], data: bytes, head: bool = False) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if not head:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if data:
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="sigv4-proxy", daemon=True)
        self._thread.start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
