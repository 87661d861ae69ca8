"""HTTP service benchmark: 32 concurrent clients against ``osrag serve`` for 60 s, per driver,
beside the library called in-process with the same concurrency.

Run against the running node (``OSRAG_URL``, default http://127.0.0.1:9200)::

    .venv/bin/python bench/bench_http.py [--clients 32] [--seconds 60] [--rounds 6] [--arms async,sync,library]
                                         [--out PATH]

The sample corpus (``golden/corpus/``) is installed and ingested into the alias
``osrag-bench-http`` (navec model, rerank off), which is dropped at the end. The arms are set up
at once (a server idles while another arm runs), each warmed up by a pass over every question,
then each is driven for ``--seconds`` in ``--rounds`` windows, interleaved with the order rotated
every round, so that load drifting on a shared machine falls on every arm alike:

* ``async``: ``osrag serve`` (AsyncSearchClient on the event loop) in its own process on a free
  loopback port; ``--clients`` clients, each one request at a time, POST /v1/search with a JWT
  for the ``staff`` group and the corpus's tenant, the 70 golden questions in turn;
* ``sync``: the same server with ``--driver sync`` (SearchClient in Starlette's thread pool);
* ``library``: no HTTP: ``AsyncSearchClient.search`` in this process with the same concurrency,
  the floor the service adds its cost to.

Throughput, client-side latency p50/p95/max, errors (any non-200 or exception), the server's
CPU seconds per request, the share of answers with passages and the load average over each
arm's windows are written to
``bench/results/http.md``. Exit 1 if any request failed.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
import jwt  # noqa: E402
from bench_common import golden_questions, log  # noqa: E402

from osrag.access import Principal  # noqa: E402
from osrag.ingest.indexing import Ingester  # noqa: E402
from osrag.search.asearch import AsyncSearchClient  # noqa: E402
from osrag.settings import Settings  # noqa: E402
from osrag.store.alias import AliasStore  # noqa: E402

RESULTS = REPO / "bench" / "results" / "http.md"
ALIAS = "osrag-bench-http"
MODEL = "navec:news-300d"
KEY = "bench-http-" + "k" * 53  # an HS256 secret of 64 bytes, for this run only
BUDGET = 800
GROUPS = ["staff"]
TENANT = "public"  # the sample corpus's documents are tenant "public"; a caller without a tenant sees none


def settings() -> Settings:
    return Settings(alias=ALIAS, embedding_model=MODEL, rerank=False, _env_file=None)


def build() -> float:
    s = settings()
    admin = AliasStore(s)
    drop(s)
    admin.install()
    t0 = time.perf_counter()
    report = Ingester(s).ingest([REPO / "golden" / "corpus"])
    assert not report.failed, report.failed
    return time.perf_counter() - t0


def drop(s: Settings) -> None:
    from osrag.names import state_index
    from osrag.vocabulary import PIPELINES

    client = AliasStore(s).cluster.client
    client.indices.delete(
        index=f"{s.alias}-*", ignore_unavailable=True, allow_no_indices=True, expand_wildcards="all"
    )
    client.indices.delete(index=state_index(s.alias), ignore_unavailable=True)
    client.indices.delete_index_template(name=f"{s.alias}-template", ignore=404)
    client.cluster.delete_component_template(name=f"{s.alias}-analysis", ignore=404)
    for variant in PIPELINES.values():
        client.transport.perform_request(
            "DELETE", f"/_search/pipeline/{s.alias}-{variant}", params={"ignore": 404}
        )


@dataclass
class Arm:
    name: str
    latencies_ms: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    server_cpu_s: float | None = None
    loads: list[float] = field(default_factory=list)  # 1-min load average at each window's start and end
    answered: int = 0  # requests whose envelope had at least one passage
    server_log: list[str] = field(default_factory=list)  # what the server printed (warnings and up)

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (and its reaped children), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(x) for x in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(driver: str, log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OSRAG_SERVE_")}
    env.update(
        OSRAG_URL=settings().url,
        OSRAG_ALIAS=ALIAS,
        OSRAG_EMBEDDING_MODEL=MODEL,
        OSRAG_RERANK="false",
        OSRAG_SERVE_PORT=str(port),
        OSRAG_SERVE_JWT_KEY=KEY,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "osrag.cli", "serve", "--driver", driver, "--log-level", "warning"],
        env=env,
        cwd=REPO / "bench",
        stdout=log_path.open("wb"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"osrag serve exited {proc.returncode}: {log_path.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit("osrag serve was not ready within 180 s")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


async def window(arm: Arm, call: Any, qs: list[str], clients: int, seconds: float, pid: int) -> None:
    """One timed window: ``clients`` workers, one request at a time each, questions in turn, until
    ``seconds`` pass; ``pid``'s CPU time and the load average are read around it."""
    arm.loads.append(os.getloadavg()[0])
    cpu0 = cpu_seconds(pid)
    end = time.monotonic() + seconds
    turn = 0

    async def worker() -> None:
        nonlocal turn
        while time.monotonic() < end:
            q = qs[turn % len(qs)]
            turn += 1
            t0 = time.perf_counter()
            try:
                passages = await call(q)
            except Exception as exc:  # a failed request is counted, never dropped
                cause = exc.__cause__ or exc.__context__
                arm.error(f"{type(exc).__name__}: {exc!s:.120} (cause: {cause!r:.120})")
                continue
            arm.latencies_ms.append((time.perf_counter() - t0) * 1000)
            arm.answered += passages > 0

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    arm.elapsed_s += time.perf_counter() - t0
    arm.server_cpu_s = (arm.server_cpu_s or 0.0) + cpu_seconds(pid) - cpu0
    arm.loads.append(os.getloadavg()[0])


async def run_arms(names: list[str], qs: list[str], clients: int, seconds: float, rounds: int) -> list[Arm]:
    """Every arm set up at once (servers idle while not driven), warmed up, then driven in
    ``rounds`` windows of ``seconds / rounds`` each, the order rotated every round, so that load
    drifting on a shared machine falls on all arms alike."""
    arms: dict[str, tuple[Arm, Any, int]] = {}
    logs: list[tuple[Arm, Path]] = []
    async with AsyncExitStack() as stack:
        for name in names:
            if name == "library":
                arm = Arm("library, AsyncSearchClient in-process")
                client = await stack.enter_async_context(AsyncSearchClient(settings()))
                arms[name] = (arm, library_call(client), os.getpid())  # the clients' work is in it too
                continue
            arm = Arm(f"HTTP, {name} driver")
            log_path = Path(tempfile.mkstemp(prefix=f"bench-http-{name}-", suffix=".log")[1])
            logs.append((arm, log_path))
            proc, url = start_server(name, log_path)
            stack.callback(stop_server, proc)
            http = await stack.enter_async_context(http_client(url, clients))
            arms[name] = (arm, http_call(http), proc.pid)
        for _arm, call, _ in arms.values():  # warm-up: every question once per arm (not counted)
            await asyncio.gather(*(call(q) for q in qs))
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                arm, call, pid = arms[name]
                await window(arm, call, qs, clients, seconds / rounds, pid)
            log(f"  round {r + 1}/{rounds} done")
    for arm, log_path in logs:
        arm.server_log = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
        log_path.unlink()
    return [arms[n][0] for n in names]


def http_client(url: str, clients: int) -> httpx.AsyncClient:
    claims = {"sub": "bench", "groups": GROUPS, "tenant": TENANT, "exp": int(time.time()) + 3600}
    headers = {"Authorization": "Bearer " + jwt.encode(claims, KEY, algorithm="HS256")}
    # keepalive_expiry below the server's keep-alive (75 s): the client drops an idle connection first.
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients, keepalive_expiry=30)
    return httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=120)


def http_call(http: httpx.AsyncClient) -> Any:
    async def call(q: str) -> int:
        resp = await http.post("/v1/search", json={"question": q, "budget_tokens": BUDGET})
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code} {resp.text[:100]}")
        return len(resp.json()["passages"])  # the client reads the envelope

    return call


def library_call(client: AsyncSearchClient) -> Any:
    who = Principal(groups=GROUPS, tenant=TENANT)

    async def call(q: str) -> int:
        env = await client.search(q, budget_tokens=BUDGET, principal=who)
        env.model_dump_json()  # what the service would send
        return len(env.passages)

    return call


def server_stack() -> str:
    """What uvicorn runs on here: uvloop and httptools when installed (the server extra), else asyncio and h11."""
    from importlib.metadata import PackageNotFoundError, version

    def v(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    loop = f"uvloop {v('uvloop')}" if v("uvloop") else "asyncio"
    http = f"httptools {v('httptools')}" if v("httptools") else "h11"
    return f"uvicorn {v('uvicorn')} ({loop}, {http}), FastAPI {v('fastapi')}, PyJWT {v('pyjwt')}"


def pct(xs: list[float], q: float) -> float:
    return (
        statistics.quantiles(xs, n=100, method="inclusive")[q - 1] if len(xs) > 1 else (xs[0] if xs else 0.0)
    )


def render(arms: list[Arm], args: argparse.Namespace, built_s: float, n_questions: int, wall_s: float) -> str:
    lines = [
        "# HTTP service benchmark",
        "",
        f"Generated by `bench/bench_http.py --clients {args.clients} --seconds {args.seconds:g} --rounds {args.rounds} --arms {args.arms}` "
        f"on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC (whole run {wall_s / 60:.1f} min).",
        "",
        "| machine | |",
        "| --- | --- |",
        f"| CPU | {platform.machine()} × {os.cpu_count()} (nproc), shared with other jobs |",
        "| OpenSearch | single local node on the same machine |",
        f"| index | `golden/corpus/` (36 documents) ingested in {built_s:.0f} s, navec:news-300d, rerank off |",
        f"| Python | {platform.python_version()} |",
        f"| server | {server_stack()} |",
        "",
        f"All arms are set up at once, each warmed up by a pass over the {n_questions} golden questions; then "
        f"each gets {args.seconds:g} s in {args.rounds} windows, interleaved (the order rotated every round, "
        f"so load drifting on the shared machine falls on every arm alike), with {args.clients} clients, "
        "each one request at a time (the questions in turn, budget {BUDGET} tokens, a JWT "
        "for the `staff` group and tenant `public`); latency is the client's wall time of one request, the envelope read. The "
        "server runs in its own process on a loopback port; `library` calls `AsyncSearchClient.search` in the "
        "bench's own process with the same concurrency (no HTTP), the floor the service's cost adds to. "
        "CPU s / request: the server process's user+system time over the arm's windows (for `library`, the bench "
        "process, its clients included).",
        "",
        "| arm | requests | errors | with passages | throughput req/s | p50 ms | p95 ms | max ms | CPU s / request | 1-min load average over its windows |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for a in arms:
        n = len(a.latencies_ms)
        errs = sum(a.errors.values())
        cpu = f"{a.server_cpu_s / max(n, 1) * 1000:.1f} ms" if a.server_cpu_s is not None else "—"
        lines.append(
            f"| {a.name} | {n} | {errs} | {a.answered / max(n, 1):.0%} | {n / a.elapsed_s:.1f} | {pct(a.latencies_ms, 50):.0f} | "
            f"{pct(a.latencies_ms, 95):.0f} | {max(a.latencies_ms, default=0):.0f} | {cpu} | "
            f"{min(a.loads, default=0):.1f}–{max(a.loads, default=0):.1f} (mean {statistics.fmean(a.loads or [0]):.1f}) |"
        )
    lib = next((a for a in arms if a.name.startswith("library")), None)
    if lib is not None and lib.latencies_ms:
        lines += ["", "Side by side (same run):", ""]
        for a in arms:
            if a is lib or not a.latencies_ms:
                continue
            ratio = (len(a.latencies_ms) / a.elapsed_s) / (len(lib.latencies_ms) / lib.elapsed_s)
            lines.append(
                f"- {a.name}: {ratio:.2f}× the library's throughput; p50 {pct(a.latencies_ms, 50) / pct(lib.latencies_ms, 50):.2f}× its p50."
            )
    failures = [f"- {a.name}: {k} × {v}" for a in arms for k, v in a.errors.items()]
    if failures:
        lines += ["", "Errors:", "", *failures]
    printed = [f"- {a.name}: `{ln[:200]}`" for a in arms for ln in a.server_log]
    lines += ["", "What the server printed at `--log-level warning` (start-up lines included):", ""]
    lines += printed or ["- nothing"]
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--arms", default="async,sync,library")
    ap.add_argument("--rounds", type=int, default=6, help="windows per arm, interleaved")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    if not 1 <= args.clients <= 256 or not 1 <= args.seconds <= 600:
        ap.error("--clients within 1..256 and --seconds within 1..600")
    arms_wanted = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = set(arms_wanted) - {"async", "sync", "library"}
    if unknown:
        ap.error(f"unknown arm(s): {', '.join(sorted(unknown))}")
    t_start = time.perf_counter()
    log(f"building {ALIAS} from golden/corpus")
    built_s = build()
    qs = golden_questions()
    try:
        log(
            f"arms {', '.join(arms_wanted)}: {args.clients} clients, {args.seconds:g} s each in {args.rounds} windows"
        )
        arms = asyncio.run(run_arms(arms_wanted, qs, args.clients, args.seconds, args.rounds))
        for arm in arms:
            log(f"  {arm.name}: {len(arm.latencies_ms)} requests, {sum(arm.errors.values())} errors")
    finally:
        drop(settings())
    text = render(arms, args, built_s, len(qs), time.perf_counter() - t_start)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 1 if any(a.errors for a in arms) else 0


if __name__ == "__main__":
    sys.exit(main())
