"""What the web_search tool adds beyond its backend's own time (issue 46; target < 5 ms).

A loopback SearXNG/Brave/Tavily backend (tests/support/fake_search.py, 10 results per
answer) is asked, alternating, by ``WebSearchTool.run`` (arguments, config, an httpx
client, a new connection, the request, the JSON parse, capping and marking the results)
and by a bare httpx request made the same way (a client per request, so a new
connection, with the same TLS context): the backend's own time. The median of the
paired differences is the tool's overhead. (A kept-alive client is no fair baseline
here: uvicorn's keep-alive answers meet the 40 ms delayed-ACK wait on loopback.) For DuckDuckGo
(whose URL cannot be pointed at loopback) the wrapper's part alone is timed: the thread
hop the tool makes around the library, our parse of its rows and the rendering.

    uv run --all-extras --dev python bench/web_search_overhead.py [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.fake_search import FakeSearch
from vikingbot.config.schema import Config
from vikingbot.session.types import SessionKey
from vikingbot.tools.base import ToolContext
from vikingbot.tools.search_backends import (
    parse_ddgs,
    parse_json,
    parse_searxng,
    tls_context,
)
from vikingbot.tools.web_search import WebSearchTool, render

TARGET_MS = 5.0
HITS = [
    (f"Result {n}: a page about the query", f"https://example.org/{n}/page", "snippet " * 30)
    for n in range(10)
]


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.2f} ms"


async def provider_round(
    fake: FakeSearch, provider: str, calls: int
) -> tuple[list[float], list[float]]:
    import httpx

    section = {"provider": provider, "baseUrl": fake.base_url, "apiKey": "k", "maxResults": 10}
    config = Config.model_validate({"bot": {"tools": {"webSearch": section}}})
    ctx = ToolContext(Path("/tmp"), SessionKey("cli", "default", "bench"), config, environ={})
    tool = WebSearchTool()
    if provider == "brave":
        req = {
            "method": "GET",
            "url": f"{fake.base_url}/res/v1/web/search",
            "params": {"q": "x y", "count": 10},
        }
    elif provider == "tavily":
        req = {
            "method": "POST",
            "url": f"{fake.base_url}/search",
            "json": {"query": "x y", "max_results": 10},
        }
    else:
        req = {
            "method": "GET",
            "url": f"{fake.base_url}/search",
            "params": {"q": "x y", "format": "json"},
        }
    tool_s: list[float] = []
    bare_s: list[float] = []
    for i in range(calls + 10):
        began = time.perf_counter()
        text = await tool.run({"query": "x y", "count": 10}, ctx)
        took_tool = time.perf_counter() - began
        began = time.perf_counter()
        async with httpx.AsyncClient(timeout=10, verify=tls_context()) as client:
            resp = await client.request(**req)
            resp.json()
        took_bare = time.perf_counter() - began
        assert "Result 9" in text and resp.status_code == 200
        if i >= 10:  # warm-up left out
            tool_s.append(took_tool)
            bare_s.append(took_bare)
    return tool_s, bare_s


async def ddgs_wrapper(calls: int) -> list[float]:
    rows = [{"title": t, "href": u, "body": s} for t, u, s in HITS]
    out: list[float] = []
    for _ in range(calls):
        began = time.perf_counter()
        got = await asyncio.to_thread(lambda: rows)
        render("x y", "duckduckgo", parse_ddgs(got), 10)
        out.append(time.perf_counter() - began)
    return out


async def main(calls: int) -> None:
    print(f"web_search overhead beyond the backend's own time, {calls} calls each, 10 results")
    with FakeSearch.start() as fake:
        fake.hits = list(HITS)
        for provider in ("searxng", "brave", "tavily"):
            tool_s, bare_s = await provider_round(fake, provider, calls)
            diffs = [t - b for t, b in zip(tool_s, bare_s, strict=True)]
            over = statistics.median(diffs) * 1000
            verdict = "ok" if over < TARGET_MS else "MISSED"
            print(
                f"  {provider:<8} tool {ms(tool_s)}   bare request {ms(bare_s)}   "
                f"overhead (median of paired differences) {over:6.2f} ms   "
                f"target < {TARGET_MS:g} ms: {verdict}"
            )
    doc = json.dumps(fake.shaped("searxng")).encode()
    own: list[float] = []
    for _ in range(calls):
        began = time.perf_counter()
        render("x y", "searxng", parse_searxng(parse_json(doc, "SearXNG")), 10)
        own.append(time.perf_counter() - began)
    print(f"  our code alone on one answer (JSON parse + parse + cap + render): {ms(own)}")
    wrap = await ddgs_wrapper(calls)
    print(
        f"  duckduckgo wrapper only (thread hop + parse + render, no network): {ms(wrap)}   "
        f"target < {TARGET_MS:g} ms: {'ok' if statistics.median(wrap) * 1000 < TARGET_MS else 'MISSED'}"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    asyncio.run(main(args.calls))
