"""The ``http`` checker: fetch a URL; a 2xx response with a body is work.

Options: ``url`` (``{scope}`` is replaced by the URL-quoted scope), optional
``headers`` (values may use ``${NAME}`` environment references, which are
treated as secrets) and ``max_bytes`` (default 1,000,000; the body beyond it is
ignored). The signature is the ETag when the server sends one, else a hash of
the body. Text bodies (capped) become the agent's context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from vikingbot.errors import CheckerError
from vikingbot.heartbeat.checkers.base import (
    Checker,
    CheckResult,
    looks_secret,
    signature_of,
    tls_context,
)

if TYPE_CHECKING:
    import httpx

DEFAULT_MAX_BYTES = 1_000_000
_TEXT_TYPES = ("text/", "json", "xml", "yaml", "csv", "javascript")


class HttpChecker(Checker):
    kind = "http"
    options = frozenset({"url", "headers", "method", "max_bytes"})

    def validate(self) -> None:
        super().validate()
        url = self.opt_str("url", required=True)
        if not url.startswith(("http://", "https://")):
            raise CheckerError(f"{self.where}.url: expected an http:// or https:// URL")
        self.opt_str_map("headers")
        method = self.opt_str("method", "GET").upper()
        if method != "GET":
            raise CheckerError(f"{self.where}.method: only GET is supported, got {method!r}")
        limit = self.opts.get("max_bytes", DEFAULT_MAX_BYTES)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise CheckerError(f"{self.where}.max_bytes: expected a positive integer")

    def _headers(self) -> dict[str, str]:
        headers = {"User-Agent": "vikingbot-checker"}
        for key, value in self.opt_str_map("headers").items():
            resolved = self.resolve(value, what=f"header {key}")
            if looks_secret(key):
                self.secrets.add(resolved)
            headers[key] = resolved
        return headers

    def _url(self, scope: str | None) -> str:
        url = self.opt_str("url")
        if "{scope}" in url:
            if not scope:
                raise CheckerError(
                    f"{self.where}.url uses {{scope}}, but the entry gave none: "
                    "write only-if: NAME:SCOPE"
                )
            url = url.replace("{scope}", quote(scope, safe=""))
        return url

    async def check(self, scope: str | None) -> CheckResult:
        import httpx

        url = self._url(scope)
        headers = self._headers()
        limit = int(self.opts.get("max_bytes", DEFAULT_MAX_BYTES))
        try:
            async with (
                httpx.AsyncClient(
                    timeout=self.config.timeout_s, follow_redirects=True, verify=tls_context()
                ) as client,
                client.stream("GET", url, headers=headers) as response,
            ):
                body, truncated = await _read_capped(response, limit)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise CheckerError(
                f"{self.where}: GET {_safe_url(url)} failed: {type(exc).__name__}: {exc}"
            ) from exc
        if not response.is_success:
            raise CheckerError(
                f"{self.where}: GET {_safe_url(url)} returned HTTP {response.status_code}"
            )
        etag = response.headers.get("etag")
        signature = signature_of("etag", etag) if etag else signature_of("body", body)
        if not body.strip():
            return CheckResult(has_work=False, signature=signature)
        return CheckResult(
            has_work=True,
            signature=signature,
            context=_context(response, body, truncated),
        )


async def _read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


def _context(response: httpx.Response, body: bytes, truncated: bool) -> str:
    ctype = response.headers.get("content-type", "").lower()
    note = f"\n[body cut at {len(body)} bytes]" if truncated else ""
    if ctype and not any(t in ctype for t in _TEXT_TYPES):
        return f"(non-text content: {ctype}, {len(body)} bytes){note}"
    return body.decode(response.encoding or "utf-8", "replace") + note


def _safe_url(url: str) -> str:
    """The URL without its query string (which may carry a key)."""
    return url.split("?", 1)[0]
