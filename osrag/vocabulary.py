"""The closed sets of words osrag speaks, and the defaults that ship.

Settings validate against these, the envelope types its fields with them, the CLI builds its
help text from them and the README names them: one place, so a default cannot be one thing
in the code and another in a help line. Imports nothing of osrag; no I/O.

Each set is a ``Literal`` (for type checkers and pydantic) and a tuple of its values read
from that ``Literal`` (for membership checks and error lines), so the two cannot drift.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = [
    "AUTH_MODES",
    "CHUNK_KINDS",
    "DEFAULT_FUSION",
    "DEFAULT_FUSION_WEIGHTS",
    "DEFAULT_JWT_ALGORITHM",
    "DEFAULT_POLICY",
    "DEFAULT_RETRIEVAL_MODE",
    "EQUAL_WEIGHT_PIPELINES",
    "FAMILY_FUSION_WEIGHTS",
    "FUSIONS",
    "FUSION_LABELS",
    "JWT_ALGORITHMS",
    "LEFT_OUT_REASONS",
    "PIPELINES",
    "POLICIES",
    "RETRIEVAL_MODES",
    "STATUSES",
    "AuthMode",
    "ChunkKind",
    "Fusion",
    "JwtAlgorithm",
    "LeftOutReason",
    "PipelineVariant",
    "Policy",
    "RetrievalMode",
    "Status",
    "describe_fusion",
]

# ------------------------------------------------------------------------------ fusion
#: How the alias's search pipeline fuses the BM25 and kNN heads: min-max normalised scores,
#: weighted arithmetic mean (``normalization-processor``), or reciprocal rank fusion
#: (``score-ranker-processor``).
Fusion = Literal["rrf", "minmax"]
FUSIONS: Final[tuple[Fusion, ...]] = get_args(Fusion)
#: The shipped fusion and its (BM25 head, kNN head) weights: chosen on the three dev sets with
#: both offline models (the reasons and numbers are beside ``Settings.fusion_weights``).
DEFAULT_FUSION: Final[Fusion] = "minmax"
DEFAULT_FUSION_WEIGHTS: Final[tuple[float, float]] = (0.6, 0.4)
#: The weights pinned with an embedding model's family (``osrag.model_defaults.model_family``), used
#: unless ``fusion_weights`` is set: a trained dense head (e5) gets an equal say -- its head alone
#: is as good as the BM25 head or better on every dev set and on their mistyped copies; navec's
#: weak dense head gets little (0.8/0.2 was level with 0.6/0.4 on the dev sets and 0.6/0.4 fell
#: below the BM25 head on held-back docs trees). Figures: docs/selection.md.
FAMILY_FUSION_WEIGHTS: Final[dict[str, tuple[float, float]]] = {"e5": (0.5, 0.5), "navec": (0.8, 0.2)}
#: How a fusion is named in prose (help text, README, reports).
FUSION_LABELS: Final[dict[str, str]] = {"minmax": "min-max", "rrf": "RRF"}

#: A search pipeline osrag installs per alias: the two fusions, and RRF with the score
#: explanation processor (for debugging a ranking).
PipelineVariant = Literal["minmax", "rrf", "rrf-explain"]
#: Pipeline variant -> its file under ``osrag/pipelines/`` (without ``.json``), which is also
#: the suffix of the pipeline's name in the cluster.
PIPELINES: Final[dict[PipelineVariant, str]] = {
    "rrf": "hybrid-rrf",
    "minmax": "hybrid-minmax",
    "rrf-explain": "hybrid-rrf-explain",
}
#: Pipeline files with an equal-weight form, for servers without weighted RRF (before 3.1).
EQUAL_WEIGHT_PIPELINES: Final[dict[str, str]] = {
    "hybrid-rrf": "hybrid-rrf-equal",
    "hybrid-rrf-explain": "hybrid-rrf-explain-equal",
}


def describe_fusion(
    fusion: str = DEFAULT_FUSION, weights: tuple[float, float] = DEFAULT_FUSION_WEIGHTS
) -> str:
    """A fusion in words, e.g. ``min-max 0.8/0.2`` (the shipped one when called bare)."""
    label = FUSION_LABELS.get(fusion, fusion)
    return f"{label} {'/'.join(f'{w:g}' for w in weights)}"


# ------------------------------------------------------------------- read path words
#: The retrieval heads ``SearchClient.retrieve`` runs: the hybrid query through the fusion
#: pipeline, the BM25 head alone (on all its fields, on the text field only, or with the
#: standard analyzer), or the kNN head alone.
RetrievalMode = Literal["hybrid", "bm25", "bm25-text", "bm25-std", "knn"]
RETRIEVAL_MODES: Final[tuple[RetrievalMode, ...]] = get_args(RetrievalMode)
DEFAULT_RETRIEVAL_MODE: Final[RetrievalMode] = "hybrid"

#: Selection policies: ``recall`` fills the budget in fused order with non-duplicate chunks
#: that are not filler; ``minimal`` keeps only chunks close to the best evidence.
Policy = Literal["recall", "minimal"]
POLICIES: Final[tuple[Policy, ...]] = get_args(Policy)
DEFAULT_POLICY: Final[Policy] = "recall"

#: What an answer is: everything relevant that was found, a budgeted selection of it, or an
#: explicit "nothing relevant".
Status = Literal["complete", "budgeted", "nothing_relevant"]
STATUSES: Final[tuple[Status, ...]] = get_args(Status)

#: Why a candidate was not delivered: it did not fit the budget, it repeats a delivered one,
#: or it would cost more than it adds.
LeftOutReason = Literal["budget", "duplicate", "not_worth"]
LEFT_OUT_REASONS: Final[tuple[LeftOutReason, ...]] = get_args(LeftOutReason)

#: What a chunk holds; ``mixed`` is a chunk packed from blocks of different kinds.
ChunkKind = Literal["text", "table", "code", "list", "mixed"]
CHUNK_KINDS: Final[tuple[ChunkKind, ...]] = get_args(ChunkKind)

# ------------------------------------------------------------------------- auth words
#: How the client proves who it is to the cluster (``OSRAG_AUTH``): nothing, basic auth,
#: AWS SigV4 request signing, a client certificate (mTLS), or a header sent as is. Unset,
#: the mode is ``basic`` when credentials are given, else ``none``.
AuthMode = Literal["none", "basic", "sigv4", "cert", "header"]
AUTH_MODES: Final[tuple[AuthMode, ...]] = get_args(AuthMode)

#: The JWT algorithms ``osrag serve`` verifies bearer tokens with (``OSRAG_SERVE_JWT_ALGORITHM``).
JwtAlgorithm = Literal["HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "PS256"]
JWT_ALGORITHMS: Final[tuple[JwtAlgorithm, ...]] = get_args(JwtAlgorithm)
DEFAULT_JWT_ALGORITHM: Final[JwtAlgorithm] = "HS256"
