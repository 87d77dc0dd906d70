"""The ``web_fetch`` tool: fetch a URL's text, with a size cap and an address guard.

Only ``http``/``https``. Before each request (and each redirect, followed by
hand, at most ``MAX_REDIRECTS``) the host is resolved and every address it
resolves to is checked: private, loopback, link-local, multicast, reserved and
unspecified addresses are refused unless ``bot.tools.web_fetch.allow_private``.
(The check and the connection resolve separately, so this guards against a
model being pointed at the local network, not against a hostile DNS server.)
The body is read up to ``max_bytes``; HTML becomes Markdown (markdownify).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from typing import Any, ClassVar
from urllib.parse import urljoin, urlsplit

from vikingbot.errors import ToolError
from vikingbot.tools.base import Tool, ToolContext

MAX_REDIRECTS = 5
MAX_TEXT_CHARS = 50_000


def forbidden_address(ip: str) -> str | None:
    """Why ``ip`` may not be fetched by default, or None. Pure."""
    addr = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    for attr, why in (
        ("is_loopback", "loopback"),
        ("is_private", "private"),
        ("is_link_local", "link-local"),
        ("is_multicast", "multicast"),
        ("is_reserved", "reserved"),
        ("is_unspecified", "unspecified"),
    ):
        if getattr(addr, attr):
            return why
    return None


async def check_host(host: str, port: int) -> None:
    """Resolve ``host`` and refuse it if any address is not public."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ToolError(f"web_fetch: cannot resolve {host}: {exc.strerror}") from exc
    for info in infos:
        ip = str(info[4][0])
        why = forbidden_address(ip)
        if why:
            raise ToolError(
                f"web_fetch: refused {host} ({ip} is a {why} address); set "
                "bot.tools.web_fetch.allow_private to fetch from the local network"
            )


# Elements whose content is never text a reader sees.
_INVISIBLE = ("script", "style", "noscript", "svg", "head", "template", "iframe", "object")


def html_to_markdown(markup: str) -> str:
    """A page as Markdown: headings, links, lists, emphasis, code and tables kept.

    Parsed with BeautifulSoup's ``html.parser`` (tolerant of any input, no
    exception on broken markup) and rendered by ``markdownify``; scripts, styles
    and the ``<head>`` are dropped first.
    """
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(markup, "html.parser")
    for node in soup(list(_INVISIBLE)):
        node.decompose()
    text = MarkdownConverter(heading_style="ATX", bullets="-", strip=["img"]).convert_soup(soup)
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


class WebFetchTool(Tool):
    name = "web_fetch"
    description = "Fetch a web page or text file over http(s) and return its text (size-capped)."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "http:// or https:// URL."}},
        "required": ["url"],
    }
    # Not read-only: a request carries data out (a URL can exfiltrate), so it is
    # approved like a write, and is not in the default unattended safe_tools.
    read_only = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        import httpx

        cfg = ctx.config.bot.tools.web_fetch
        url = str(args["url"]).strip()
        async with httpx.AsyncClient(timeout=cfg.timeout_s, follow_redirects=False) as client:
            for _ in range(MAX_REDIRECTS + 1):
                parts = urlsplit(url)
                if parts.scheme not in ("http", "https") or not parts.hostname:
                    raise ToolError(f"web_fetch: only http(s) URLs can be fetched, not {url!r}")
                if not cfg.allow_private:
                    port = parts.port or (443 if parts.scheme == "https" else 80)
                    await check_host(parts.hostname, port)
                try:
                    async with client.stream("GET", url) as resp:
                        if resp.is_redirect and "location" in resp.headers:
                            url = urljoin(url, resp.headers["location"])
                            continue
                        body, truncated = await _read(resp, cfg.max_bytes)
                        return _render(url, resp, body, truncated, cfg.max_bytes)
                except httpx.HTTPError as exc:
                    raise ToolError(f"web_fetch: {url} failed: {exc}") from exc
        raise ToolError(f"web_fetch: more than {MAX_REDIRECTS} redirects from {args['url']}")


async def _read(resp: Any, cap: int) -> tuple[bytes, bool]:
    data = bytearray()
    async for chunk in resp.aiter_bytes():
        data += chunk
        if len(data) > cap:
            return bytes(data[:cap]), True
    return bytes(data), False


def _render(url: str, resp: Any, body: bytes, truncated: bool, cap: int) -> str:
    ctype = resp.headers.get("content-type", "")
    if not (ctype.startswith("text/") or "json" in ctype or "xml" in ctype or not ctype):
        return f"status {resp.status_code}; {url} is {ctype} ({len(body)} bytes), not text"
    text = body.decode(resp.encoding or "utf-8", errors="replace")
    if "html" in ctype or text.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
        text = html_to_markdown(text)
    if len(text) > MAX_TEXT_CHARS:
        text, truncated = text[:MAX_TEXT_CHARS], True
    note = f"\n[... truncated at {cap} bytes]" if truncated else ""
    return f"status {resp.status_code} from {url}\n\n{text}{note}"
