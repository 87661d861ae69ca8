"""What each surface adds to a search: the framework adapters and the MCP server beside
``SearchClient.search`` itself, on the same index, model and questions, in one run.

Run against the running node (``OSRAG_URL``, default http://127.0.0.1:9200)::

    .venv/bin/python bench/bench_integrations.py [--rounds 3] [--out PATH]

The sample corpus (``golden/corpus/``) is installed and ingested into the alias
``osrag-bench-integrations`` (navec model, rerank off), dropped at the end. Arms: ``direct``
(``SearchClient.search``), ``langchain`` (``invoke``), ``llamaindex`` (``retrieve``), ``haystack``
(``run``) and ``mcp`` (``search`` over stdio with the SDK's client, ``osrag mcp`` in its own
process). Each of the 70 golden questions goes through every arm in turn (round robin, so load
on this shared machine falls on all arms alike), ``--rounds`` times after a warm-up pass; each
adapter's passages must be the direct ones (chunk ids in order), else the run fails. Latency per
call (p50/p95) and the p50 overhead over ``direct`` go to ``bench/results/integrations.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "false")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_common import golden_questions, log  # noqa: E402
from haystack import Pipeline  # noqa: E402
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

from osrag.access import Principal  # noqa: E402
from osrag.envelope import Envelope  # noqa: E402
from osrag.ingest.indexing import Ingester  # noqa: E402
from osrag.integrations import haystack as hs  # noqa: E402
from osrag.integrations import langchain as lc  # noqa: E402
from osrag.integrations import llamaindex as li  # noqa: E402
from osrag.search.client import SearchClient  # noqa: E402
from osrag.settings import Settings  # noqa: E402
from osrag.store.alias import AliasStore  # noqa: E402

RESULTS = REPO / "bench" / "results" / "integrations.md"
ALIAS = "osrag-bench-integrations"
MODEL = "navec:news-300d"
BUDGET = 800
STAFF = Principal(groups=["staff"])
ARMS = ("direct", "langchain", "llamaindex", "haystack", "mcp")


def settings() -> Settings:
    return Settings(alias=ALIAS, embedding_model=MODEL, rerank=False, _env_file=None)


def build(s: Settings) -> float:
    from tests.integration.conftest import drop_alias

    admin = AliasStore(s)
    drop_alias(admin.cluster.client, s.alias)
    admin.install()
    t0 = time.perf_counter()
    report = Ingester(s).ingest([REPO / "golden" / "corpus"])
    assert not report.failed, report.failed
    return time.perf_counter() - t0


async def run(rounds: int) -> tuple[dict[str, list[float]], int]:
    s = settings()
    client = SearchClient(s)
    lang = lc.OsragRetriever(client=client, principal=STAFF, budget_tokens=BUDGET)
    llama = li.OsragRetriever(client, principal=STAFF, budget_tokens=BUDGET)
    pipe = Pipeline()
    pipe.add_component("r", hs.OsragRetriever(client, principal=STAFF, budget_tokens=BUDGET))
    env = {
        "OSRAG_URL": s.url,
        "OSRAG_ALIAS": ALIAS,
        "OSRAG_EMBEDDING_MODEL": MODEL,
        "OSRAG_RERANK": "false",
        "OSRAG_CACHE_DIR": str(s.models_dir.parent),
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "osrag.cli", "mcp", "--group", "staff"], env=env, cwd=REPO
    )
    qs = golden_questions()
    times: dict[str, list[float]] = {a: [] for a in ARMS}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def call(arm: str, q: str) -> list[str]:
            if arm == "direct":
                return [p.chunk_id for p in client.search(q, principal=STAFF, budget_tokens=BUDGET).passages]
            if arm == "langchain":
                return [d.id for d in lang.invoke(q)]
            if arm == "llamaindex":
                return [n.node.node_id for n in llama.retrieve(q)]
            if arm == "haystack":
                return [d.id for d in pipe.run({"r": {"query": q}})["r"]["documents"]]
            res = await session.call_tool("search", {"question": q, "budget_tokens": BUDGET})
            assert not res.is_error, res.content
            return [p.chunk_id for p in Envelope.model_validate(res.structured_content).passages]

        for r in range(rounds + 1):  # round 0 warms every arm up
            log(f"round {r}/{rounds}")
            for q in qs:
                want: list[str] | None = None
                for arm in ARMS:
                    t0 = time.perf_counter()
                    got = await call(arm, q)
                    dt_ms = (time.perf_counter() - t0) * 1000
                    want = got if want is None else want
                    assert got == want, (arm, q, got, want)  # the same passages on every surface
                    if r:
                        times[arm].append(dt_ms)
    return times, len(qs)


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1] if len(xs) > 1 else xs[0]


def render(times: dict[str, list[float]], n_q: int, rounds: int, built_s: float, wall_s: float) -> str:
    base = statistics.median(times["direct"])
    rows = [
        f"| {arm} | {len(xs)} | {statistics.median(xs):.1f} | {pct(xs, 95):.1f} | "
        f"{statistics.median(xs) - base:+.1f} | {statistics.median(xs) / base:.2f} |"
        for arm, xs in times.items()
    ]
    return "\n".join(
        [
            "# Surfaces: what the adapters and the MCP server add to a search",
            "",
            f"Run {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')} on {platform.node()} "
            f"({os.cpu_count()} CPUs, shared with other work), `python bench/bench_integrations.py "
            f"--rounds {rounds}`, {wall_s:.0f} s in all.",
            "",
            f"Index: `golden/corpus/` ingested in {built_s:.0f} s, {MODEL}, rerank off; principal `staff`, "
            f"budget {BUDGET}. Each of the {n_q} golden questions through every arm in turn, {rounds} round(s) "
            "after a warm-up round; every arm returned the direct call's passages for every question.",
            "",
            "| arm | calls | p50 ms | p95 ms | p50 over direct, ms | p50 ratio |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            "`mcp` is a JSON-RPC round trip over stdio to `osrag mcp` in another process, which renders the "
            "text view and serialises the envelope as structured content; the framework arms run in this "
            "process on the same `SearchClient`.",
            "",
        ]
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    s = settings()
    t0 = time.perf_counter()
    log(f"building {ALIAS} from golden/corpus")
    try:
        built_s = build(s)
        times, n_q = asyncio.run(run(args.rounds))
    finally:
        from tests.integration.conftest import drop_alias

        drop_alias(AliasStore(s).cluster.client, s.alias)
    text = render(times, n_q, args.rounds, built_s, time.perf_counter() - t0)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
