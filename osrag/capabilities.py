"""What the OpenSearch server osrag talks to can do, and what osrag adapts to it.

Read once per client from ``GET /`` (version) and ``GET /_cat/plugins`` (plugin names), at
``install`` and lazily before the first search. The reading is I/O at the edge
(``detect``); everything else is pure: ``from_server`` turns a version string and plugin
names into a frozen ``Capabilities`` (or one ``ClusterError`` line naming what is missing),
and the adaptations (the pipeline bodies, the hybrid request) are derived from it.

Version lines, as probed on 2.19.1 and 3.6.0 nodes (docs/cluster.md, "Server lines"):

- 2.19: hybrid query with ``pagination_depth``, kNN ``method_parameters``, min-max
  normalization with weights, the ``hybrid_score_explanation`` response processor, RRF
  through ``score-ranker-processor`` WITHOUT weights ("supported parameters are
  [rank_constant]"), no top-level hybrid ``filter`` ("[hybrid] query does not support
  [filter]"), and ``collapse`` beside a hybrid query accepted but not applied.
- 3.0 adds the top-level hybrid ``filter``; 3.1 weighted RRF and ``collapse`` with the hybrid
  query (those two thresholds from the OpenSearch documentation; only 2.19.1 and 3.6.0 were probed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from osrag.errors import ClusterError
from osrag.vocabulary import EQUAL_WEIGHT_PIPELINES

#: The oldest server line osrag runs on (``score-ranker-processor`` and hybrid pagination).
MIN_VERSION = (2, 19, 0)
#: Plugins every osrag index and query needs.
REQUIRED_PLUGINS = ("opensearch-knn", "opensearch-neural-search")

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


def parse_version(text: str) -> tuple[int, int, int]:
    """``"2.19.1"`` (or ``"3.6.0-SNAPSHOT"``) as a comparable triple; anything else is a ClusterError."""
    m = _VERSION.match(str(text or "").strip())
    if not m:
        raise ClusterError(f"cannot read the OpenSearch version from {text!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


@dataclass(frozen=True)
class Capabilities:
    """The features osrag chooses between, for one server."""

    version: str
    plugins: tuple[str, ...]
    weighted_rrf: bool  # score-ranker-processor takes combination.parameters.weights (3.1+)
    hybrid_filter: bool  # hybrid query takes a top-level filter (3.0+)
    pagination_depth: bool  # hybrid query takes pagination_depth (2.19+)
    knn_method_parameters: bool  # kNN query takes method_parameters.ef_search (2.16+)
    collapse_in_hybrid: bool  # collapse works with the hybrid query (3.1+)
    adapted: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def in_use(self) -> list[str]:
        """Names of the optional features this server has (what ``status`` lists as used)."""
        flags = (
            "weighted_rrf",
            "hybrid_filter",
            "pagination_depth",
            "knn_method_parameters",
            "collapse_in_hybrid",
        )
        return [f for f in flags if getattr(self, f)]


def from_server(version: str, plugins: Iterable[str]) -> Capabilities:
    """The capabilities of a server of ``version`` with ``plugins``; below 2.19 or without a
    required plugin it is one ``ClusterError`` naming what is missing."""
    v = parse_version(version)
    names = tuple(sorted(set(plugins)))
    missing = [p for p in REQUIRED_PLUGINS if p not in names]
    problems = []
    if v < MIN_VERSION:
        problems.append(f"OpenSearch {version} is older than 2.19 (osrag needs 2.19 or later)")
    if missing:
        problems.append(f"plugin(s) {', '.join(missing)} missing")
    if problems:
        raise ClusterError("this cluster cannot run osrag: " + "; ".join(problems))
    caps = Capabilities(
        version=version,
        plugins=names,
        weighted_rrf=v >= (3, 1, 0),
        hybrid_filter=v >= (3, 0, 0),
        pagination_depth=v >= (2, 19, 0),
        knn_method_parameters=v >= (2, 16, 0),
        collapse_in_hybrid=v >= (3, 1, 0),
    )
    return _with_adapted(caps)


def _with_adapted(c: Capabilities) -> Capabilities:
    out = []
    if not c.weighted_rrf:
        out.append("rrf pipelines without weights (equal-weight RRF): score-ranker weights need 3.1")
    if not c.hybrid_filter:
        out.append("filters inside each head, not the top-level hybrid filter: that needs 3.0")
    if not c.collapse_in_hybrid:
        out.append("duplicates collapsed by osrag (2x over-fetch), not by the server: collapse needs 3.1")
    return Capabilities(**{**asdict(c), "adapted": tuple(out)})


def from_responses(info: Mapping[str, Any], cat_plugins: Iterable[Mapping[str, Any]]) -> Capabilities:
    """``from_server`` on the answers to ``GET /`` and ``GET /_cat/plugins?format=json``."""
    version = str((info.get("version") or {}).get("number") or "")
    return from_server(version, (str(p.get("component")) for p in cat_plugins))


def detect(cluster: Any) -> Capabilities:
    """Ask the cluster (an ``osrag.connection.Cluster``): two requests (none on Serverless)."""
    if getattr(cluster.settings, "serverless", False):
        return serverless_capabilities()
    return from_responses(cluster.info(), cluster.plugins())


# ---------------------------------------------------------------- Amazon OpenSearch Serverless
#: What a Serverless collection is taken to support. It has no ``GET /`` version and no
#: ``_cat/plugins`` to probe, and runs the k-NN and neural-search plugins it manages itself; osrag
#: takes the conservative side of every feature it would otherwise probe: filters inside each
#: head, no ``pagination_depth``, duplicates collapsed by osrag, no weighted RRF.
SERVERLESS_VERSION = "serverless"


def serverless_capabilities() -> Capabilities:
    """Fixed capabilities for OSRAG_AWS_SERVICE=aoss (no probe is possible there)."""
    caps = Capabilities(
        version=SERVERLESS_VERSION,
        plugins=REQUIRED_PLUGINS,
        weighted_rrf=False,
        hybrid_filter=False,
        pagination_depth=False,
        knn_method_parameters=True,
        collapse_in_hybrid=False,
    )
    return _with_adapted(caps)


#: Command -> what Serverless lacks that the command needs (Amazon's list of the operations a
#: collection supports, "Supported operations and plugins in Amazon OpenSearch Serverless", has
#: none of these). ``osrag`` refuses these commands up front with this line; docs/auth.md has the table.
SERVERLESS_LACKS: dict[str, str] = {
    "ingest": (
        "_delete_by_query and _refresh, which ingest's hidden-then-flipped versions need "
        "(replaced chunks are deleted by query, a batch is refreshed before its flip)"
    ),
    "reindex": "_reindex and the scroll API (a zero-downtime reindex copies on the server)",
    "demo": "_delete_by_query and _refresh (the demo ingests the sample corpus)",
}

#: Options that cannot work on Serverless, and why (checked with the command's settings).
SERVERLESS_FUSION = (
    "OSRAG_FUSION=rrf: Serverless hybrid search offers the normalization-processor (min_max, l2) only, "
    "not score-ranker-processor (RRF); use OSRAG_FUSION=minmax"
)
SERVERLESS_ROLES = (
    "install --roles: Serverless has no security plugin REST API; grant access with a data access "
    "policy instead (docs/auth.md)"
)


def refuse_on_serverless(settings: Any, command: str, *, roles: bool = False) -> None:
    """One ``ConfigError`` line when ``command`` needs an API Serverless lacks; nothing otherwise."""
    from osrag.errors import ConfigError

    if not getattr(settings, "serverless", False):
        return
    if command in SERVERLESS_LACKS:
        raise ConfigError(
            f"osrag {command} cannot run on OpenSearch Serverless: it lacks {SERVERLESS_LACKS[command]}"
        )
    if roles:
        raise ConfigError(SERVERLESS_ROLES)
    if settings.fusion == "rrf" and command in ("install", "search", "section", "eval"):
        raise ConfigError(SERVERLESS_FUSION)


#: Pipeline files that have a form for servers without weighted RRF (before 3.1).
EQUAL_WEIGHT_FILES = EQUAL_WEIGHT_PIPELINES


def pipeline_file(name: str, caps: Capabilities) -> str:
    """The pipeline file (under ``pipelines/``) this server gets for the shipped file ``name``:
    before 3.1 the RRF pipelines are the equal-weight ones (``score-ranker-processor`` refuses
    ``parameters`` there); the pipeline keeps its name, so readers need not know."""
    if not caps.weighted_rrf:
        return EQUAL_WEIGHT_FILES.get(name, name)
    return name


def adapt_search_body(body: dict[str, Any], caps: Capabilities) -> dict[str, Any]:
    """A candidates request as this server runs it. Before 3.0 a top-level hybrid ``filter``
    moves into each head (the server refuses it: "[hybrid] query does not support [filter]");
    before 3.1 a ``collapse`` beside a hybrid query is dropped -- 2.19.1 accepts it and
    silently returns the duplicates, so the caller must collapse itself (``collapse_in_hybrid``)."""
    hybrid = (body.get("query") or {}).get("hybrid")
    if hybrid is None:
        return body
    if not caps.pagination_depth and "pagination_depth" in hybrid:
        hybrid = {k: v for k, v in hybrid.items() if k != "pagination_depth"}
    if not caps.hybrid_filter and "filter" in hybrid:
        flt = hybrid["filter"]
        hybrid = {
            **{k: v for k, v in hybrid.items() if k != "filter"},
            "queries": [_filtered(q, flt) for q in hybrid["queries"]],
        }
    out = {**body, "query": {**body["query"], "hybrid": hybrid}}
    if not caps.collapse_in_hybrid:
        out.pop("collapse", None)
    return out


def _filtered(query: dict[str, Any], flt: Any) -> dict[str, Any]:
    """``query`` with ``flt`` applied inside it: a kNN head gets it as its efficient filter
    (so the graph search is not starved by a post-filter), anything else a ``bool.filter``."""
    knn = query.get("knn")
    if knn is not None and len(knn) == 1:
        ((field_name, head),) = knn.items()
        mine = head.get("filter")
        both = {"bool": {"filter": [mine, flt]}} if mine else flt
        return {"knn": {field_name: {**head, "filter": both}}}
    return {"bool": {"must": [query], "filter": [flt]}}


def fusion_in_use(fusion: str, weights: tuple[float, float], caps: Capabilities) -> str:
    """What the alias's search pipeline does on this server, in words ``status`` prints."""
    w = "/".join(f"{x:g}" for x in weights)
    if fusion == "rrf" and not caps.weighted_rrf:
        return f"rrf, equal weights (OSRAG_FUSION_WEIGHTS {w} not applied: weighted RRF needs 3.1)"
    return f"{fusion} {w}"


# ---------------------------------------------------------------- k-NN engines
#: The k-NN engines a ``knn_vector`` field may name. Lucene is Java inside the plugin; faiss and
#: nmslib are native libraries (``libopensearchknn_faiss.so`` ...) that official distributions ship
#: and the Maven plugin zips do not: a node without them dies opening an index that needs them.
KNN_ENGINES = ("lucene", "faiss", "nmslib")
NATIVE_ENGINES = ("faiss", "nmslib")


def engines_from_stats(stats: Mapping[str, Any]) -> dict[str, str]:
    """engine -> ``"yes"`` | ``"unknown"`` from ``GET _plugins/_knn/stats``.

    Lucene works wherever the plugin runs. A native engine is ``"yes"`` once every node reports
    it initialised (the library loaded); until an index has used it, nothing tells whether it
    would load, and osrag never creates a faiss index to find out (that is what crashes a node
    without the library), so it is ``"unknown"``."""
    nodes = list((stats.get("nodes") or {}).values())
    out = {"lucene": "yes"}
    for engine in NATIVE_ENGINES:
        flags = [bool(n.get(f"{engine}_initialized")) for n in nodes]
        out[engine] = "yes" if flags and all(flags) else "unknown"
    return out


def engines_from_install(install_dir: Any) -> dict[str, str]:
    """engine -> ``"yes"`` | ``"no"`` for a local install: are the native libraries there?"""
    from pathlib import Path

    root = Path(install_dir)
    libs = {
        p.name
        for d in (root / "plugins" / "opensearch-knn" / "lib", root / "lib")
        if d.is_dir()
        for p in d.iterdir()
    }
    out = {"lucene": "yes" if (root / "plugins" / "opensearch-knn").is_dir() else "no"}
    for engine in NATIVE_ENGINES:
        out[engine] = "yes" if any(name.startswith(f"libopensearchknn_{engine}") for name in libs) else "no"
    return out


def _knn_fields(props: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Mapping[str, Any]]]:
    for name, spec in (props or {}).items():
        if not isinstance(spec, Mapping):
            continue
        if spec.get("type") == "knn_vector":
            yield prefix + name, spec
        for sub in ("properties", "fields"):
            if isinstance(spec.get(sub), Mapping):
                yield from _knn_fields(spec[sub], f"{prefix}{name}.")


def field_engine(spec: Mapping[str, Any], version: tuple[int, int, int]) -> str:
    """The engine a ``knn_vector`` field uses: its ``method.engine``, else the server's default
    (faiss since 2.18, nmslib before); a field built from a trained model is faiss."""
    method = spec.get("method")
    if isinstance(method, Mapping) and method.get("engine"):
        return str(method["engine"])
    if spec.get("model_id"):
        return "faiss"
    return "faiss" if version >= (2, 18, 0) else "nmslib"


def index_engines(
    mappings: Mapping[str, Any], knn_enabled: Mapping[str, bool], version: tuple[int, int, int]
) -> dict[str, set[str]]:
    """index -> the native engines its ANN ``knn_vector`` fields need (``index.knn: true`` only;
    without it vectors are searched exactly and need no engine)."""
    out: dict[str, set[str]] = {}
    for index, body in mappings.items():
        if not knn_enabled.get(index):
            continue
        props = ((body or {}).get("mappings") or {}).get("properties") or {}
        engines = {field_engine(spec, version) for _, spec in _knn_fields(props)}
        if engines:
            out[index] = engines
    return out
