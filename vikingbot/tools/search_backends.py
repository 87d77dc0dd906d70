"""The web search backends behind ``web_search``: one request each, and a total parser.

``bot.tools.web_search.provider`` picks one:

- ``duckduckgo`` (the default, no key): the ``ddgs`` library's DuckDuckGo engine
  (``DDGS().text(..., backend="duckduckgo")``), run in a worker thread;
- ``brave``: the Brave Search API (``GET /res/v1/web/search``, key in
  ``X-Subscription-Token``);
- ``tavily``: the Tavily API (``POST /search``, key as a bearer token);
- ``searxng``: a SearXNG instance's JSON API (``GET /search?format=json``, no key; the
  instance must list ``json`` under ``search.formats``).

Each ``parse_*`` function is pure and total: any JSON value (or the library's list of
dicts) becomes a list of ``Hit`` or a ``SearchFailed`` naming what was wrong, never
another exception. The ``fetch_*`` functions do the I/O and turn every transport
failure, HTTP error (429 and 5xx included) and unreadable body into ``SearchFailed``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from vikingbot.errors import ToolError

if TYPE_CHECKING:
    from vikingbot.config.schema import WebSearchConfig

Provider = Literal["duckduckgo", "brave", "tavily", "searxng"]
PROVIDERS: tuple[Provider, ...] = ("duckduckgo", "brave", "tavily", "searxng")
BRAVE_URL = "https://api.search.brave.com"
TAVILY_URL = "https://api.tavily.com"
KEY_VARIABLES: dict[str, str] = {"brave": "BRAVE_API_KEY", "tavily": "TAVILY_API_KEY"}
MAX_BODY_BYTES = 2_000_000  # a search answer larger than this is not read


@dataclass(frozen=True)
class Hit:
    """One search result as the backend gave it (untrusted, not yet capped)."""

    title: str
    url: str
    snippet: str


class SearchFailed(ToolError):
    """The backend failed, refused (``rate_limited``) or answered something unreadable."""

    def __init__(self, message: str, *, rate_limited: bool = False) -> None:
        super().__init__(message)
        self.rate_limited = rate_limited


# ------------------------------------------------------------------ parsing (pure)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _hits(items: Any, title: str, url: str, snippet: str, where: str) -> list[Hit]:
    if not isinstance(items, list):
        raise SearchFailed(f"{where} is not a list")
    hits = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        link = _text(item.get(url)).strip()
        if not link:
            continue
        hits.append(Hit(_text(item.get(title)), link, _text(item.get(snippet))))
    return hits


def _field(doc: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(key)
    return doc


def parse_brave(doc: Any) -> list[Hit]:
    """Brave's ``{"web": {"results": [{"title", "url", "description"}]}}``; no ``web``
    section means no results."""
    if not isinstance(doc, Mapping):
        raise SearchFailed("Brave answered something other than a JSON object")
    if doc.get("web") is None:
        return []
    return _hits(
        _field(doc, "web", "results"), "title", "url", "description", "Brave's web.results"
    )


def parse_tavily(doc: Any) -> list[Hit]:
    """Tavily's ``{"results": [{"title", "url", "content"}]}``."""
    if not isinstance(doc, Mapping):
        raise SearchFailed("Tavily answered something other than a JSON object")
    return _hits(doc.get("results"), "title", "url", "content", "Tavily's results")


def parse_searxng(doc: Any) -> list[Hit]:
    """SearXNG's ``{"results": [{"title", "url", "content"}]}``."""
    if not isinstance(doc, Mapping):
        raise SearchFailed("SearXNG answered something other than a JSON object")
    return _hits(doc.get("results"), "title", "url", "content", "SearXNG's results")


def parse_ddgs(rows: Any) -> list[Hit]:
    """The ``ddgs`` library's text results: ``[{"title", "href", "body"}]``."""
    return _hits(rows, "title", "href", "body", "the DuckDuckGo results")


def parse_json(body: bytes, who: str) -> Any:
    """``body`` as JSON, or ``SearchFailed`` saying it is not."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise SearchFailed(f"{who} answered something that is not JSON") from exc


def http_failure(who: str, status: int, retry_after: str | None) -> SearchFailed:
    """What an HTTP error status from ``who`` means, in one sentence. Pure."""
    if status == 429:
        wait = f" (it asks to wait {retry_after[:20]}s)" if retry_after else ""
        return SearchFailed(f"{who} is rate-limiting searches{wait}", rate_limited=True)
    if status in (401, 403):
        return SearchFailed(f"{who} refused the request (HTTP {status}): check the key or URL")
    if status >= 500:
        return SearchFailed(f"{who} is failing (HTTP {status})")
    return SearchFailed(f"{who} answered HTTP {status}")


# ------------------------------------------------------------------ requests


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One TLS context for every search (httpx builds a new one per client otherwise:
    tens of milliseconds reading the CA bundle, on every call)."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def key_for(cfg: WebSearchConfig, environ: Mapping[str, str]) -> str | None:
    """The provider's key: ``api_key`` in the config, else its environment variable."""
    if cfg.api_key:
        return cfg.api_key
    var = KEY_VARIABLES.get(cfg.provider)
    return environ.get(var) if var else None


def problem(cfg: WebSearchConfig, environ: Mapping[str, str]) -> str | None:
    """What is missing for the configured provider (a sentence), or None. Pure."""
    if cfg.provider in KEY_VARIABLES and not key_for(cfg, environ):
        var = KEY_VARIABLES[cfg.provider]
        return (
            f"web_search: provider {cfg.provider} needs a key: set {var} or "
            f"bot.tools.web_search.api_key"
        )
    if cfg.provider == "searxng" and not cfg.base_url:
        return "web_search: provider searxng needs bot.tools.web_search.base_url (your instance)"
    return None


async def search(
    cfg: WebSearchConfig, query: str, count: int, environ: Mapping[str, str]
) -> list[Hit]:
    """Ask the configured backend; ``SearchFailed`` for anything but results."""
    missing = problem(cfg, environ)
    if missing:
        raise SearchFailed(missing)
    if cfg.provider == "duckduckgo":
        return await fetch_duckduckgo(query, count, cfg.timeout_s)
    return await _fetch_json(cfg, query, count, key_for(cfg, environ) or "")


async def fetch_duckduckgo(query: str, count: int, timeout_s: float) -> list[Hit]:
    """DuckDuckGo through ``ddgs`` (its HTTP client is blocking: a worker thread)."""
    from ddgs import DDGS
    from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

    def ask() -> Any:
        return DDGS(timeout=max(1, round(timeout_s))).text(
            query, max_results=count, backend="duckduckgo"
        )

    try:
        rows = await asyncio.to_thread(ask)
    except RatelimitException as exc:
        raise SearchFailed("DuckDuckGo is rate-limiting searches", rate_limited=True) from exc
    except TimeoutException as exc:
        raise SearchFailed(f"DuckDuckGo did not answer within {timeout_s:g}s") from exc
    except DDGSException as exc:
        if "no results" in str(exc).lower():
            return []
        raise SearchFailed(f"DuckDuckGo failed: {str(exc)[:200]}") from exc
    return parse_ddgs(rows)


async def _fetch_json(cfg: WebSearchConfig, query: str, count: int, key: str) -> list[Hit]:
    import httpx

    who = {"brave": "Brave", "tavily": "Tavily", "searxng": "SearXNG"}[cfg.provider]
    if cfg.provider == "brave":
        base = (cfg.base_url or BRAVE_URL).rstrip("/")
        request: dict[str, Any] = {
            "method": "GET",
            "url": f"{base}/res/v1/web/search",
            "params": {"q": query, "count": count},
            "headers": {"Accept": "application/json", "X-Subscription-Token": key},
        }
    elif cfg.provider == "tavily":
        base = (cfg.base_url or TAVILY_URL).rstrip("/")
        request = {
            "method": "POST",
            "url": f"{base}/search",
            "json": {"query": query, "max_results": count},
            "headers": {"Authorization": f"Bearer {key}"},
        }
    else:
        request = {
            "method": "GET",
            "url": f"{(cfg.base_url or '').rstrip('/')}/search",
            "params": {"q": query, "format": "json"},
            "headers": {"Accept": "application/json"},
        }
    try:
        async with (
            httpx.AsyncClient(timeout=cfg.timeout_s, verify=tls_context()) as client,
            client.stream(**request) as resp,
        ):
            if resp.status_code != 200:
                raise http_failure(who, resp.status_code, resp.headers.get("retry-after"))
            body = bytearray()
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > MAX_BODY_BYTES:
                    raise SearchFailed(f"{who} answered more than {MAX_BODY_BYTES} bytes")
    except httpx.TimeoutException as exc:
        raise SearchFailed(f"{who} did not answer within {cfg.timeout_s:g}s") from exc
    except httpx.HTTPError as exc:
        raise SearchFailed(f"{who} cannot be reached: {type(exc).__name__}") from exc
    doc = parse_json(bytes(body), who)
    parse = {"brave": parse_brave, "tavily": parse_tavily, "searxng": parse_searxng}
    return parse[cfg.provider](doc)


def check(
    cfg: WebSearchConfig, environ: Mapping[str, str], *, live: bool
) -> tuple[Literal["ok", "warn", "fail"], str]:
    """``vikingbot doctor``'s line for web search: what is missing, or (``live``) one
    search for ``vikingbot`` and what came of it."""
    missing = problem(cfg, environ)
    if missing:
        return "fail", missing
    where = f" at {cfg.base_url}" if cfg.base_url else ""
    if not live:
        return "ok", f"{cfg.provider}{where} (--live searches once)"
    began = time.perf_counter()
    try:
        hits = asyncio.run(search(cfg, "vikingbot", 3, environ))
    except SearchFailed as exc:
        return "fail", f"{cfg.provider}{where}: a test search failed: {exc}"
    took = time.perf_counter() - began
    return "ok", f"{cfg.provider}{where}: a test search found {len(hits)} result(s) in {took:.1f} s"
