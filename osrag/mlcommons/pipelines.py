"""The ingest pipeline through which the cluster embeds an index's chunks (pure; no I/O).

An index whose model is a local ml-commons model (``ml:NAME``, ``ml-id:ID`` deployed in the
cluster, not behind a connector) is written through the pipeline ``{alias}-embed-{model id}``:
a chunk to embed is sent with its embedded text (``osrag.records.embedding_text``: context and
text) in ``EMBED_INPUT_FIELD``; the ``text_embedding`` processor writes its vector into the
index's knn field and a ``remove`` processor drops the input field before the strict mapping
sees it. A chunk whose vector is reused (its text unchanged) is sent with its vector and no
input field, so the processor makes no inference call for it.

No prefix is added here: neural-search's processor asks an asymmetric model for the PASSAGE
side, and ml-commons prepends the model's ``passage_prefix`` itself (e5's ``passage: ``), as it
does for a ``_predict`` that names ``content_type: passage``. The vectors are thus those of
``_predict`` (tests/integration/test_cluster_ingest.py checks it).

Ingest pipelines refuse ``_meta``: what marks the pipeline as osrag's is its ``description``
(``MARKER``) and its ``version``.
"""

from __future__ import annotations

from typing import Any

#: The transient field a chunk's embedded text travels in (removed by the pipeline before indexing).
EMBED_INPUT_FIELD = "embedding_input"
#: The knn field the vectors go to (osrag's chunk template).
VECTOR_FIELD = "embedding"
#: Bumped when the body below changes: an installed pipeline of another version is drift.
PIPELINE_VERSION = 1
#: Documents whose texts the processor sends to the model in one inference call. One: the calls of a
#: bulk request then run side by side on the ML nodes' predict threads (and spread over the nodes),
#: whereas a batched call embeds its texts one after another; batches of 32 were the slower
#: (bench/bench_cluster_embed.py, bench/results/cluster-ingest-2026-12-07.md).
PROCESSOR_BATCH = 1
#: How an osrag ingest pipeline's description begins.
MARKER = "osrag:"


def embed_pipeline_name(alias: str, model_id: str) -> str:
    """``{alias}-embed-{model id}``: one pipeline per alias and model (a reindex to another model
    gets its own, so the old index's writes keep theirs until the switch)."""
    return f"{alias}-embed-{model_id}"


def embed_pipeline(model_id: str, *, batch_size: int = PROCESSOR_BATCH) -> dict[str, Any]:
    """The body of the ingest pipeline that embeds ``EMBED_INPUT_FIELD`` with ``model_id``."""
    return {
        "description": f"{MARKER} embed chunks with ml-commons model {model_id} (osrag ingest pipeline)",
        "version": PIPELINE_VERSION,
        "processors": [
            {
                "text_embedding": {
                    "model_id": model_id,
                    "field_map": {EMBED_INPUT_FIELD: VECTOR_FIELD},
                    "batch_size": batch_size,
                }
            },
            {"remove": {"field": EMBED_INPUT_FIELD, "ignore_missing": True}},
        ],
    }


def is_osrag_pipeline(body: dict[str, Any] | None) -> bool:
    return bool(body) and str((body or {}).get("description", "")).startswith(MARKER)


def pipeline_drift(desired: dict[str, Any], installed: dict[str, Any] | None) -> list[str]:
    """What differs between the pipeline osrag wants and the one the cluster holds (empty: none).

    Compared: the version, then each processor's type and the settings osrag sets (the cluster
    may add defaults of its own, which are not drift)."""
    if installed is None:
        return ["missing in cluster"]
    diffs: list[str] = []
    if not is_osrag_pipeline(installed):
        diffs.append("not an osrag pipeline (its description does not start with 'osrag:')")
    if installed.get("version") != desired.get("version"):
        diffs.append(f"version: wanted {desired.get('version')!r}, cluster {installed.get('version')!r}")
    want, have = desired.get("processors") or [], installed.get("processors") or []
    if len(want) != len(have):
        diffs.append(f"processors: wanted {len(want)}, cluster {len(have)}")
    for i, (w, h) in enumerate(zip(want, have)):
        (wkind, wconf), (hkind, hconf) = next(iter(w.items())), next(iter(h.items()))
        if wkind != hkind:
            diffs.append(f"processor {i}: wanted {wkind}, cluster {hkind}")
            continue
        for key, value in wconf.items():
            if hconf.get(key) != value:
                diffs.append(f"processor {i} ({wkind}).{key}: wanted {value!r}, cluster {hconf.get(key)!r}")
    return diffs


__all__ = [
    "EMBED_INPUT_FIELD",
    "MARKER",
    "PIPELINE_VERSION",
    "PROCESSOR_BATCH",
    "VECTOR_FIELD",
    "embed_pipeline",
    "embed_pipeline_name",
    "is_osrag_pipeline",
    "pipeline_drift",
]
