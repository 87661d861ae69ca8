"""Reindex: zero-downtime moves of the corpus into a new concrete index, rollback, cleanup.

Apart from ``admin`` (which installs and names things) because a reindex is a long,
locked, interruptible job with its own failure handling; it uses ``AliasStore`` for index
creation, ``_meta`` and the alias switch, and ``osrag.admin.copying`` to move the chunks.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from osrag.admin.copying import REEMBED, SERVER_SIDE, IndexCopier
from osrag.embedding import embedder_for
from osrag.errors import ConfigError, IndexStateError
from osrag.settings import Settings
from osrag.store import locking
from osrag.store.alias import AliasStore
from osrag.store.locking import LockRecord, describe, earliest, lock_state


@dataclass
class ReindexPlan:
    alias: str
    source: str
    target: str | None
    source_model: str
    target_model: str
    source_dimension: int | None
    target_dimension: int | None
    method: str  # copying.SERVER_SIDE or copying.REEMBED
    chunks: int
    documents: int
    stale_target: str | None = None
    #: State of a reindex lock found on the source: "live", "dead" or "unknown" (None: no lock).
    lock_state: str | None = None
    #: Documents written to the source by an ingest during the copy, copied again before the switch.
    caught_up: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RollbackDiff:
    """What readers would see change if the alias went back: doc_ids by kind."""

    #: in the live index only: added since the switch, gone after a rollback
    dropped: tuple[str, ...] = ()
    #: in the previous index only: deleted since the switch, served again after a rollback
    republished: tuple[str, ...] = ()
    #: in both with other versions: changed since (an ACL among them), served as before
    reverted: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return len(self.dropped) + len(self.republished) + len(self.reverted)

    def describe(self) -> str:
        def some(ids: tuple[str, ...]) -> str:
            return ", ".join(ids[:3]) + (", ..." if len(ids) > 3 else "")

        parts = [
            f"{len(self.republished)} deleted since would be served again ({some(self.republished)})"
            if self.republished
            else "",
            f"{len(self.reverted)} changed since would go back to their older version and its access "
            f"({some(self.reverted)})"
            if self.reverted
            else "",
            f"{len(self.dropped)} added since would be gone ({some(self.dropped)})" if self.dropped else "",
        ]
        return "; ".join(p for p in parts if p) or "none"


def rollback_diff(live: dict[str, frozenset[str]], previous: dict[str, frozenset[str]]) -> RollbackDiff:
    """How readers' documents change when the alias moves from ``live`` to ``previous``
    (doc_id -> visible version keys of each); pure."""
    return RollbackDiff(
        dropped=tuple(sorted(set(live) - set(previous))),
        republished=tuple(sorted(set(previous) - set(live))),
        reverted=tuple(sorted(d for d in set(live) & set(previous) if live[d] != previous[d])),
    )


class Reindexer:
    """Zero-downtime moves of the corpus into a new concrete index.

    Readers keep using the alias on the old index until a verified new index is
    complete; the switch is one ``_aliases`` request. The old index stays for
    ``rollback``. The lock is a document created with ``op_type=create`` (``osrag.store.locking``):
    of two runs exactly one gets it. An ingest re-checks it before every batch and stops loudly
    once it is taken; a batch that was already writing is waited for, and whatever ingests
    wrote into the old index during the copy is copied again before the switch.
    """

    def __init__(self, settings: Settings, admin: AliasStore | None = None) -> None:
        self.s = settings
        self.admin = admin or AliasStore(settings)
        self.cluster = self.admin.cluster
        self.copier = IndexCopier(self.cluster, settings.alias)
        #: What the last ``rollback`` changed for readers (with ``force``, what it gave up).
        self.last_rollback = RollbackDiff()

    def counts(self, index: str) -> tuple[int, int]:
        """(documents, chunks) readers can see in ``index``."""
        return self.copier.counts(index)

    def plan(self, model_name: str | None = None) -> ReindexPlan:
        source = self.admin.require_index()
        meta = self.admin.meta(source)
        target_model = (
            model_name or self.s.embedding_model or meta.embedding_model or self.s.effective_embedding_model
        )
        emb = embedder_for(self.s, target_model)
        same = target_model == meta.embedding_model and emb.dimension == meta.dimension
        docs, chunks = self.counts(source)
        lock = locking.read_lock(self.cluster, self.s.alias)
        return ReindexPlan(
            alias=self.s.alias,
            source=source,
            target=None,
            source_model=str(meta.embedding_model),
            target_model=target_model,
            source_dimension=meta.dimension,
            target_dimension=emb.dimension,
            method=SERVER_SIDE if same else REEMBED,
            chunks=chunks,
            documents=docs,
            stale_target=lock.target if lock else None,
            lock_state=lock_state(lock) if lock else None,
        )

    def run(
        self, model_name: str | None = None, progress: Callable[[int, int], None] | None = None
    ) -> ReindexPlan:
        plan = self.plan(model_name)
        source = plan.source
        meta = self.admin.meta(source)
        # The lock first: a run that loses the race stops here, before it has made anything.
        record = self._take_lock(source)
        token = record.token
        target: str | None = None
        try:
            # The plan was read before the lock: another reindex may have run to completion in
            # between and moved the alias. Copying the old source now would switch the alias
            # back to stale data and orphan that run's index, so refuse instead.
            live = self.admin.current_index()
            if live != source:
                raise IndexStateError(
                    f"the reindex lock of {self.s.alias}: another reindex finished while this one "
                    f"started (alias moved {source} -> {live}); nothing done, re-run if still needed"
                )
            # Batches being written now registered before the lock existed: the catch-up looks
            # at everything written since the earliest of them started.
            since = earliest(
                locking.writers(self.cluster, self.s.alias), dt.datetime.fromisoformat(str(record.since))
            )
            emb = embedder_for(self.s, plan.target_model)
            target = self.admin.create_index(embedder=emb)
            plan.target = target
            locking.update(self.cluster, self.s.alias, token, target=target)
            self.copier.copy(source, target, emb, plan.method, plan.chunks, progress)
            self.cluster.call("refresh", self.cluster.client.indices.refresh, index=target)
            plan.caught_up = self.copier.catch_up(source, target, emb, plan.method, since)
            self.verify(source, target)
            self.admin.update_meta(
                target,
                last_ingest_at=meta.last_ingest_at,
                previous_index=source,
                reindexed_from=source,
                # A server-side copy keeps the source's chunks as they are: they carry content_hash
                # only if the source's did. Re-embedded chunks get it (copying.reembedded).
                content_hash=plan.method != SERVER_SIDE or meta.content_hash,
                # Both methods copy token_count as the source counted it (re-embedding keeps the text).
                token_counter=meta.counter,
            )
            held = locking.read_lock(self.cluster, self.s.alias)
            if held is None or held.token != token:
                raise IndexStateError(
                    f"the reindex lock of {self.s.alias} was released or taken over while copying into "
                    f"{target} (`osrag reindex --abort`?); alias not switched"
                )
        except BaseException:
            # Failed or interrupted (Ctrl-C) before the switch: readers never saw the new index.
            # Drop it and release the lock, so ingest is not refused until someone re-runs reindex.
            self._abandon(target, token)
            raise
        # Atomic switch: one _aliases request removes the old and adds the new.
        self.admin.point_alias(target)
        locking.release(self.cluster, self.s.alias, token)
        return plan

    def _take_lock(self, source: str) -> LockRecord:
        """Create the lock document (``op_type=create``); a live holder is an ``IndexStateError``.

        A lock whose process is dead (a killed run) is cleared -- its half-built index dropped --
        and taken once more; a racer that takes it first wins, and this run stops.
        """
        locking.ensure_state_index(self.cluster, self.s.alias, self.s.replicas)
        record = locking.holder()
        try:
            locking.acquire(self.cluster, self.s.alias, record)
            return record
        except locking.LockHeld as held:
            lock = held.lock or LockRecord(token="")  # None: released meanwhile
            state = lock_state(lock)
            if state == "live":
                raise IndexStateError(f"{describe(lock)} and is still running") from held
            if state == "unknown":
                raise IndexStateError(
                    f"{describe(lock)}; whether it still runs cannot be checked from this host. "
                    "If it does not, `osrag reindex --abort` drops its half-built index and the lock"
                ) from held
            # A killed run left a half-built index: it never had the alias, so drop it.
            self._drop_half_built(source, lock)
            locking.release(self.cluster, self.s.alias, lock.token)
        record = locking.holder()
        locking.acquire(self.cluster, self.s.alias, record)
        return record

    def _drop_half_built(self, source: str, lock: LockRecord) -> str | None:
        stale = lock.target
        if not stale or stale == source or stale == self.admin.current_index():
            return None
        self.cluster.call(
            "delete half-built index",
            self.cluster.client.indices.delete,
            index=stale,
            ignore_unavailable=True,
        )
        return str(stale)

    def _abandon(self, target: str | None, token: str) -> None:
        """Best effort: delete ``target`` and release the lock if it is still ours."""
        try:
            if target and self.admin.current_index() != target:
                self.cluster.call(
                    "delete abandoned index",
                    self.cluster.client.indices.delete,
                    index=target,
                    ignore_unavailable=True,
                )
            locking.release(self.cluster, self.s.alias, token)
        except Exception:
            pass

    def abort(self) -> dict[str, Any] | None:
        """Drop the half-built index of a reindex that no longer runs, and release its lock.

        Returns the lock that was released (None when there was none). A reindex that
        still runs on this host is refused: stop it first.
        """
        source = self.admin.require_index()
        lock = locking.read_lock(self.cluster, self.s.alias)
        if not lock:
            return None
        if lock_state(lock) == "live":
            raise IndexStateError(f"{describe(lock)} and is still running; stop it before aborting")
        self._drop_half_built(source, lock)
        locking.release(self.cluster, self.s.alias, lock.token)
        return lock.as_dict()

    def verify(self, source: str, target: str) -> None:
        """Counts match and a sample of queries finds results in the new index."""
        s_docs, s_chunks = self.counts(source)
        t_docs, t_chunks = self.counts(target)
        if (s_docs, s_chunks) != (t_docs, t_chunks):
            raise IndexStateError(
                f"verification failed: {target} has {t_docs} documents / {t_chunks} chunks, "
                f"{source} has {s_docs} / {s_chunks}; alias not switched"
            )
        if s_chunks == 0:
            return
        sample = self.cluster.call(
            "sample",
            self.cluster.client.search,
            index=source,
            body={"size": 5, "_source": ["title"], "sort": [{"chunk_id": "asc"}]},
        )
        for hit in sample["hits"]["hits"]:
            title = hit["_source"].get("title") or ""
            if not title.strip():
                continue
            got = self.cluster.call(
                "sample query",
                self.cluster.client.search,
                index=target,
                body={"size": 1, "query": {"match": {"title": title}}},
            )
            if not got["hits"]["hits"]:
                raise IndexStateError(
                    f"verification failed: query {title!r} finds nothing in {target}; alias not switched"
                )

    # ---- rollback and cleanup ---------------------------------------------------------
    def rollback(self, force: bool = False) -> tuple[str, str]:
        """Point the alias back to the previous index.

        Refused when readers would then see other documents than now -- one deleted or changed
        (newly restricted, say) since the switch served as it was, one added since gone -- unless
        ``force``: the previous index is the corpus as it was, and going back to it must be a
        decision, not a side effect. The refusal counts each kind (``RollbackDiff``)."""
        current = self.admin.require_index()
        meta = self.admin.meta(current)
        lock = locking.read_lock(self.cluster, self.s.alias)
        if lock and lock_state(lock) != "dead":
            # Its switch would take the alias away from the index rolled back to.
            raise IndexStateError(f"{describe(lock)}; roll back once it has finished")
        previous = meta.previous_index
        if not previous:
            raise IndexStateError(f"{current} records no previous index to roll back to")
        if not self.cluster.call("check index", self.cluster.client.indices.exists, index=previous):
            raise IndexStateError(f"previous index {previous} no longer exists (cleaned up?)")
        diff = rollback_diff(self.visible_documents(current), self.visible_documents(previous))
        if diff.total and not force:
            raise IndexStateError(
                f"rollback refused: {diff.total} document(s) differ between {current} (live) and "
                f"{previous}: {diff.describe()}; `osrag rollback --force` does that, or re-run "
                "`osrag reindex` to move to a new index instead"
            )
        self.admin.point_alias(previous)
        self.admin.update_meta(previous, previous_index=current)
        self.last_rollback = diff
        return current, previous

    def visible_documents(self, index: str) -> dict[str, frozenset[str]]:
        """doc_id -> the version keys readers would see of it in ``index`` (the hidden list applied)."""
        found: dict[str, set[str]] = {}
        after: dict[str, Any] | None = None
        while True:
            comp: dict[str, Any] = {
                "size": 2000,
                "sources": [
                    {"d": {"terms": {"field": "doc_id"}}},
                    {"v": {"terms": {"field": "version_key"}}},
                ],
            }
            if after:
                comp["after"] = after
            resp = self.cluster.call(
                "compare documents",
                self.cluster.client.search,
                index=index,
                body={
                    "size": 0,
                    "query": {"bool": {"filter": self.copier.visible()}},
                    "aggs": {"docs": {"composite": comp}},
                },
                params={"request_cache": "false"},
            )
            agg = resp["aggregations"]["docs"]
            for b in agg["buckets"]:
                found.setdefault(b["key"]["d"], set()).add(b["key"]["v"])
            after = agg.get("after_key")
            if not agg["buckets"] or not after:
                return {d: frozenset(v) for d, v in found.items()}

    def indices(self) -> list[dict[str, Any]]:
        """Concrete indices of this alias, oldest first.

        Only names this alias's ``create_index`` makes (``{alias}-{fingerprint}-{timestamp}``):
        the pattern ``{alias}-*`` also matches the indices of an alias that extends this one
        (``x-light-…`` for ``x``), which must never be listed, let alone cleaned up, here.
        """
        own = re.compile(rf"^{re.escape(self.s.alias)}-[0-9a-f]{{10}}-[0-9]{{17}}$")
        rows = self.cluster.call(
            "cat indices",
            self.cluster.client.cat.indices,
            index=f"{self.s.alias}-*",
            format="json",
            h="index,creation.date,docs.count",
            params={"expand_wildcards": "all"},
        )
        rows = [r for r in rows if own.match(r["index"])]
        return sorted(rows, key=lambda r: int(r.get("creation.date") or 0))

    def cleanup(self, keep: int = 1) -> list[str]:
        """Delete old indices, keeping the newest ``keep`` besides the live one; never the live one,
        nor the index a reindex is building (a killed run's is dropped by the next run or ``--abort``)."""
        if keep < 0:
            raise ConfigError("--keep must be >= 0")
        current = self.admin.current_index()
        protected = {current} if current else set()
        if current:
            held = locking.read_lock(self.cluster, self.s.alias)
            target = held.target if held else None
            if target:
                protected.add(target)
        others = [r["index"] for r in self.indices() if r["index"] not in protected]
        doomed = others[: max(0, len(others) - keep)]
        for name in doomed:
            self.cluster.call("delete index", self.cluster.client.indices.delete, index=name)
        return doomed
