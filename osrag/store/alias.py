"""The alias and what stands behind it: templates, pipelines, the concrete index and its ``_meta``.

The alias (``settings.alias``) is what readers and writers use; behind it is one
concrete index named ``{alias}-{fingerprint}-{timestamp}``, where the
fingerprint hashes the embedding model, its dimension and the template content.
The index ``_meta.osrag`` (``osrag.records.IndexMeta``, read and written here only)
records the model (name, dimension, prefixes, files' hash), the template version and
fingerprint, and the time of the last ingest. Everything an admin sees here is installed
from the JSON files in ``index_templates/`` and ``pipelines/``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from osrag import templates
from osrag.capabilities import SERVERLESS_VERSION, Capabilities, detect, pipeline_file
from osrag.connection import Cluster
from osrag.embedding import Embedder, embedder_for
from osrag.errors import IndexStateError, OsragError
from osrag.mlcommons.blueprints import is_cluster_model, parse_ref
from osrag.mlcommons.errors import MLCommonsError
from osrag.mlcommons.pipelines import embed_pipeline, embed_pipeline_name, pipeline_drift
from osrag.mlcommons.records import ModelInfo
from osrag.names import ANALYZERS, pipeline_name, template_name, utcnow
from osrag.records import IndexMeta
from osrag.settings import Settings
from osrag.vocabulary import DEFAULT_FUSION, PIPELINES, PipelineVariant


@dataclass
class Drift:
    name: str
    kind: str
    differences: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.kind} {self.name}: " + "; ".join(self.differences)


class AliasStore:
    """The alias in the cluster: install and inspect its template, pipelines and concrete index."""

    def __init__(self, settings: Settings, cluster: Cluster | None = None) -> None:
        self.s = settings
        self.cluster = cluster or Cluster(settings)
        self._caps: Capabilities | None = None
        self._weights: tuple[float, float] | None = None

    def capabilities(self) -> Capabilities:
        """What the server supports (read once per AliasStore; a ClusterError when it cannot run osrag)."""
        if self._caps is None:
            self._caps = detect(self.cluster)
        return self._caps

    # ---- names ----------------------------------------------------------------
    @property
    def alias(self) -> str:
        return self.s.alias

    def pipeline_name(self, variant: PipelineVariant = DEFAULT_FUSION) -> str:
        return pipeline_name(self.alias, variant)

    @property
    def template_name(self) -> str:
        return template_name(self.alias)

    # ---- desired state from files ------------------------------------------------
    def fusion_weights(self) -> tuple[float, float]:
        """The weights the alias's pipelines carry: ``OSRAG_FUSION_WEIGHTS`` when set; else those
        pinned with the family of the model the alias's index is pinned to, so that a process naming
        another model (or none, and so the default) neither re-weighs an existing alias nor reads its
        pipelines as drift; else, with no index yet, those of the model a new index gets."""
        if self._weights is None:
            if "fusion_weights" in self.s.model_fields_set:
                self._weights = self.s.effective_fusion_weights
            else:
                try:
                    index = self.current_index()
                    pinned = self.meta(index).embedding_model if index else None
                except OsragError:  # not reachable (yet): the settings' model decides
                    pinned = None
                self._weights = self.s.fusion_weights_for(pinned or self.s.effective_embedding_model)
        return self._weights

    def _params(self) -> dict[str, Any]:
        return {
            "template_version": str(templates.TEMPLATE_VERSION),
            "template_version_int": templates.TEMPLATE_VERSION,
            "pipeline_version": templates.PIPELINE_VERSION,
            "alias": self.alias,
            "stemmer": self.s.stemmer,
            "shards": self.s.shards,
            "replicas": self.s.replicas,
            "ef_search": self.s.hnsw_ef_search,
            "rank_constant": self.s.rrf_rank_constant,
            # One alias's pattern "{alias}-*" also matches the indices of an alias that
            # extends it ("x-*" vs "x-light-*"); OpenSearch refuses two overlapping
            # templates of equal priority, and the longer (more specific) alias must win.
            "template_priority": 200 + len(self.alias),
        }

    def desired_components(self) -> dict[str, dict[str, Any]]:
        p = self._params()
        out: dict[str, dict[str, Any]] = {}
        for part in ("analysis",):
            doc = templates.load_template(f"osrag-{part}", p)
            out[f"{self.alias}-{part}"] = {
                "template": doc["template"],
                "version": templates.TEMPLATE_VERSION,
                "_meta": doc["_meta"],
            }
        return out

    def desired_index_template(self) -> dict[str, Any]:
        return templates.load_template("osrag-chunks", self._params())

    def desired_pipelines(self) -> dict[str, dict[str, Any]]:
        p = {**self._params(), "weights": [float(x) for x in self.fusion_weights()]}
        caps = self.capabilities()  # the file this server accepts (equal-weight RRF before 3.1)
        # Serverless offers no score-ranker-processor: its RRF pipelines can be neither installed
        # nor used (OSRAG_FUSION=rrf is refused there), so they are not wanted, nor drift.
        rrf_served = caps.version != SERVERLESS_VERSION
        return {
            self.pipeline_name(v): templates.load_pipeline(pipeline_file(f, caps), p)
            for v, f in PIPELINES.items()
            if rrf_served or not v.startswith("rrf")
        }

    # ---- install ------------------------------------------------------------------
    def install(self, create_index: bool = True) -> dict[str, Any]:
        """Create or update templates and pipelines; create the first index + alias if none."""
        c = self.cluster
        client = c.client
        self.capabilities()  # below 2.19 or without k-NN / neural-search: one line, nothing written
        emb = None
        if create_index and self.current_index() is None:
            # The model loads before anything is written: one that cannot load leaves no
            # templates or pipelines behind for an index that will never exist.
            emb = embedder_for(self.s)
            _ = emb.dimension
        for name, body in self.desired_components().items():
            c.call(
                f"put component template {name}", client.cluster.put_component_template, name=name, body=body
            )
        c.call(
            f"put index template {self.template_name}",
            client.indices.put_index_template,
            name=self.template_name,
            body=self.desired_index_template(),
        )
        for name, body in self.desired_pipelines().items():
            c.call(
                f"put search pipeline {name}",
                client.transport.perform_request,
                "PUT",
                f"/_search/pipeline/{name}",
                body=body,
            )
        created = None
        if emb is not None and self.current_index() is None:
            created = self.create_index(embedder=emb)
            self.point_alias(created)
        self.install_ingest_pipeline()
        return {"alias": self.alias, "created_index": created, "index": self.current_index()}

    def installed(self, kind: str, name: str) -> dict[str, Any] | None:
        """The body the cluster holds for a component template, index template or search
        pipeline (``kind`` as in ``Drift``), or None when it is not installed."""
        path, key, unwrap = {
            "component template": (
                f"/_component_template/{name}",
                "component_templates",
                "component_template",
            ),
            "index template": (f"/_index_template/{name}", "index_templates", "index_template"),
            "search pipeline": (f"/_search/pipeline/{name}", None, None),
        }[kind]
        c = self.cluster
        got = c.call(f"get {kind}", c.client.transport.perform_request, "GET", path, params={"ignore": 404})
        if key is None:
            return got[name] if got and name in got else None
        items = (got or {}).get(key) or []
        return items[0][unwrap] if items else None

    def check(self) -> list[Drift]:
        """What differs between the files and the cluster (empty when in sync)."""
        wanted = [("component template", n, b) for n, b in self.desired_components().items()]
        wanted.append(("index template", self.template_name, self.desired_index_template()))
        wanted += [("search pipeline", n, b) for n, b in self.desired_pipelines().items()]
        drifts: list[Drift] = []
        for kind, name, body in wanted:
            have = self.installed(kind, name)
            diffs = ["missing in cluster"] if have is None else _compare(body, have)
            if diffs:
                drifts.append(Drift(name, kind, diffs))
        index = self.current_index()
        if index is None:
            drifts.append(Drift(self.alias, "alias", ["no index behind the alias"]))
        else:
            have_layout = self.layout(index)
            want_layout = {"shards": self.s.shards, "replicas": self.s.replicas}
            diffs = [
                f"number_of_{k}: settings {want_layout[k]} vs index {have_layout[k]}"
                + (" (a new index takes it: `osrag reindex`)" if k == "shards" else "")
                for k in ("shards", "replicas")
                if have_layout[k] != want_layout[k]
            ]
            if diffs:
                drifts.append(Drift(index, "index", diffs))
        drifts += self.ingest_pipeline_drift()
        return drifts

    def layout(self, index: str) -> dict[str, int]:
        """The index's shard and replica counts as the cluster holds them (OSRAG_SHARDS/REPLICAS)."""
        c = self.cluster
        got = c.call("get index settings", c.client.indices.get_settings, index=index)
        idx = next(iter(got.values()))["settings"]["index"]
        return {"shards": int(idx["number_of_shards"]), "replicas": int(idx["number_of_replicas"])}

    # ---- the ingest pipeline of a model in the cluster (osrag.mlcommons.pipelines) ------------------
    def pipeline_model(self) -> ModelInfo | None:
        """The local ml-commons model the alias's index is pinned to (the settings' model while
        there is no index), which embeds at ingest through a pipeline; None for a model that runs
        in the app or behind a connector (those keep ``_predict``). ``MLCommonsError`` when gone."""
        index = self.current_index()
        spec = self.meta(index).embedding_model if index else self.s.effective_embedding_model
        if not spec or not is_cluster_model(spec):
            return None
        from osrag.mlcommons.client import MLCommons

        info = MLCommons(self.cluster.client).find(parse_ref(spec))
        return info if info.where == "cluster" else None

    def desired_ingest_pipeline(self, model_id: str | None = None) -> tuple[str, dict[str, Any]] | None:
        """(name, body) of the ingest pipeline for ``model_id`` (default: ``pipeline_model``'s), or None."""
        if model_id is None:
            info = self.pipeline_model()
            if info is None:
                return None
            model_id = info.model_id
        return embed_pipeline_name(self.alias, model_id), embed_pipeline(model_id)

    def install_ingest_pipeline(self, model_id: str | None = None) -> str | None:
        """Put the ingest pipeline (``desired_ingest_pipeline``); its name, None when there is none."""
        wanted = self.desired_ingest_pipeline(model_id)
        if wanted is None:
            return None
        return put_ingest_pipeline(self.cluster, *wanted)

    def ingest_pipeline_drift(self) -> list[Drift]:
        """What differs between the ingest pipeline the alias's model needs and the cluster's."""
        try:
            wanted = self.desired_ingest_pipeline()
        except MLCommonsError as exc:  # the model is gone: ingest would fail, so say it here
            return [Drift(self.alias, "ingest pipeline", [str(exc)])]
        if wanted is None:
            return []
        name, body = wanted
        diffs = pipeline_drift(body, installed_ingest_pipeline(self.cluster, name))
        return [Drift(name, "ingest pipeline", diffs)] if diffs else []

    # ---- indices --------------------------------------------------------------------
    def create_index(self, model_name: str | None = None, embedder: Embedder | None = None) -> str:
        """A new concrete index from the current template, pinned to one embedding model."""
        emb = embedder or embedder_for(self.s, model_name)
        dim = emb.dimension
        comps = self.desired_components()
        fp = templates.fingerprint(emb.model_name, dim, templates.TEMPLATE_VERSION, comps)
        now = utcnow()
        name = f"{self.alias}-{fp}-{now.strftime('%Y%m%d%H%M%S%f')[:-3]}"
        knn = templates.load_template(
            "knn-field",
            {
                "dimension": dim,
                "engine": self.s.knn_engine,
                "m": self.s.hnsw_m,
                "ef_construction": self.s.hnsw_ef_construction,
            },
        )
        choice = self.s.embedding_choice
        meta = IndexMeta(
            embedding_model=emb.model_name,
            # How the model was chosen, when it is the settings' choice (a reindex target is named).
            embedding_model_source=choice.line("embedding model") if choice.name == emb.model_name else None,
            embedding_fingerprint=emb.fingerprint,
            dimension=dim,
            query_prefix=emb.query_prefix,
            passage_prefix=emb.passage_prefix,
            template_version=templates.TEMPLATE_VERSION,
            fingerprint=fp,
            stemmer=self.s.stemmer,
            created_at=now.isoformat(),
            content_hash=True,  # every chunk osrag writes now carries it
        )
        body = {
            "mappings": {"_meta": {"osrag": meta.to_meta()}, "properties": {"embedding": knn["embedding"]}}
        }
        self.cluster.call(f"create index {name}", self.cluster.client.indices.create, index=name, body=body)
        return name

    def current_index(self) -> str | None:
        """The concrete index the alias points to (None when there is no alias)."""
        client = self.cluster.client
        # Scoped to the alias (GET /{alias}/_alias/{alias}), not all indices: a role with
        # rights on this alias's names only (osrag.admin.roles) may ask it on a secured cluster.
        got = self.cluster.call(
            "get alias", client.indices.get_alias, index=self.alias, name=self.alias, ignore=404
        )
        names = [k for k in (got or {}) if k not in ("error", "status")]
        if len(names) > 1:
            raise IndexStateError(
                f"alias {self.alias} points to {len(names)} indices: {', '.join(sorted(names))}"
            )
        return names[0] if names else None

    def require_index(self) -> str:
        idx = self.current_index()
        if idx is None:
            raise IndexStateError(f"alias {self.alias} does not exist; run `osrag install` first")
        return idx

    def point_alias(self, index: str) -> None:
        """Move the alias to ``index`` in one atomic ``_aliases`` request."""
        actions: list[dict[str, Any]] = []
        old = self.current_index()
        if old and old != index:
            actions.append({"remove": {"index": old, "alias": self.alias}})
        actions.append({"add": {"index": index, "alias": self.alias, "is_write_index": True}})
        self.cluster.call(
            "update aliases", self.cluster.client.indices.update_aliases, body={"actions": actions}
        )

    def meta(self, index: str | None = None) -> IndexMeta:
        """What ``index`` (default: the one behind the alias) records of itself, as the current
        record (an older osrag's is migrated; an index without ``_meta.osrag`` is not ``known``)."""
        index = index or self.require_index()
        got = self.cluster.call("get mapping", self.cluster.client.indices.get_mapping, index=index)
        return IndexMeta.from_mapping(next(iter(got.values()))["mappings"])

    def update_meta(self, index: str, **changes: Any) -> IndexMeta:
        """Read-modify-write of ``_meta.osrag``, validated as a record (the server replaces the
        whole ``_meta``; keys a newer osrag wrote are kept). Returns the record written."""
        record = self.meta(index).updated(**changes)
        self.cluster.call(
            "update index meta",
            self.cluster.client.indices.put_mapping,
            index=index,
            body={"_meta": {"osrag": record.to_meta()}},
        )
        return record

    # ---- analysis -------------------------------------------------------------------------
    def analyze(self, text: str, analyzers: tuple[str, ...] = ANALYZERS) -> dict[str, list[dict[str, Any]]]:
        """Tokens each installed analyzer produces for ``text`` (admin's debugging view)."""
        index = self.require_index()
        out: dict[str, list[dict[str, Any]]] = {}
        for name in analyzers:
            got = self.cluster.call(
                f"analyze with {name}",
                self.cluster.client.indices.analyze,
                index=index,
                body={"analyzer": name, "text": text},
            )
            out[name] = [
                {
                    "token": t["token"],
                    "position": t["position"],
                    "start": t["start_offset"],
                    "end": t["end_offset"],
                    **({"length": t["positionLength"]} if t.get("positionLength", 1) > 1 else {}),
                }
                for t in got.get("tokens", [])
            ]
        return out

    def tokens(self, text: str, analyzer: str = "ru_index") -> list[str]:
        return [t["token"] for t in self.analyze(text, (analyzer,))[analyzer]]


def put_ingest_pipeline(cluster: Cluster, name: str, body: dict[str, Any]) -> str:
    """PUT one ingest pipeline; its name."""
    cluster.call(f"put ingest pipeline {name}", cluster.client.ingest.put_pipeline, id=name, body=body)
    return name


def installed_ingest_pipeline(cluster: Cluster, name: str) -> dict[str, Any] | None:
    """The ingest pipeline ``name`` as the cluster holds it, None when there is none."""
    got = cluster.call(f"get ingest pipeline {name}", cluster.client.ingest.get_pipeline, id=name, ignore=404)
    return got.get(name) if isinstance(got, dict) else None


def ensure_ingest_pipeline(cluster: Cluster, alias: str, model_id: str) -> str:
    """The name of the alias's ingest pipeline for ``model_id``, put when missing or different
    (ingest and reindex call it before writing through it)."""
    name, body = embed_pipeline_name(alias, model_id), embed_pipeline(model_id)
    if pipeline_drift(body, installed_ingest_pipeline(cluster, name)):
        put_ingest_pipeline(cluster, name, body)
    return name


def resolve_mapping(alias: str, got: Mapping[str, Any] | None) -> tuple[str, IndexMeta, dict[str, Any]]:
    """(index, its record, mapped fields) from the answer to GET ``{alias}/_mapping``."""
    names = [k for k in (got or {}) if k not in ("error", "status")]
    if not names:
        raise IndexStateError(f"alias {alias} does not exist; run `osrag install` first")
    if len(names) > 1:
        raise IndexStateError(f"alias {alias} points to {len(names)} indices: {', '.join(sorted(names))}")
    mapping = (got or {})[names[0]]["mappings"]
    return names[0], IndexMeta.from_mapping(mapping), dict(mapping.get("properties") or {})


def _flatten(node: Any, prefix: str = "") -> dict[str, str]:
    """Dotted paths to normalised leaf strings (the server returns settings as strings)."""
    out: dict[str, str] = {}
    if isinstance(node, dict):
        for k, v in node.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(node, list):
        out[prefix] = json.dumps([_norm_leaf(x) for x in node], ensure_ascii=False, sort_keys=True)
    else:
        out[prefix] = _norm_leaf(node)
    return out


def _norm_leaf(v: Any) -> Any:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, dict):
        return {k: _norm_leaf(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_norm_leaf(x) for x in v]
    return str(v)


def _settings_key(path: str) -> str:
    # "template.settings.index.knn" and "template.settings.knn" mean the same thing.
    return path.replace(".settings.index.", ".settings.")


def _compare(desired: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    want = {_settings_key(k): v for k, v in _flatten(desired).items()}
    have = {_settings_key(k): v for k, v in _flatten(actual).items()}
    diffs = []
    for path, value in sorted(want.items()):
        if path.startswith("_meta.notes"):
            continue
        if path not in have:
            diffs.append(f"{path} missing in cluster")
        elif have[path] != value:
            diffs.append(f"{path}: file {value!r} vs cluster {have[path]!r}")
    return diffs
