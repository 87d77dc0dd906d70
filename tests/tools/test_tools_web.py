"""web_fetch: refuses local addresses by default; fetches, caps and de-HTMLs when allowed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vikingbot.errors import ToolError
from vikingbot.testing.server import serve_app
from vikingbot.tools.base import ToolContext
from vikingbot.tools.web import WebFetchTool, forbidden_address, html_to_markdown

PAGE = """<!doctype html><html><head><title>t</title><style>p{}</style></head>
<body><h1>News</h1><script>alert('x')</script><p>Release 1.2 is out &amp; stable.</p></body></html>"""


@pytest.fixture
def site() -> Iterator[str]:
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse
    from starlette.routing import Route

    async def page(request: object) -> HTMLResponse:
        return HTMLResponse(PAGE)

    async def big(request: object) -> PlainTextResponse:
        return PlainTextResponse("y" * 5000)

    async def moved(request: object) -> RedirectResponse:
        return RedirectResponse("/page", status_code=302)

    app = Starlette(routes=[Route("/page", page), Route("/big", big), Route("/moved", moved)])
    with serve_app(app) as url:
        yield url


@pytest.mark.parametrize(
    ("ip", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("192.168.0.10", "private"),
        ("169.254.169.254", "private"),  # the cloud metadata address
        ("fe80::1", "private"),
        ("0.0.0.0", "private"),
        ("224.0.0.1", "multicast"),
        ("93.184.216.34", None),
        ("2606:4700::1111", None),
    ],
)
def test_forbidden_addresses(ip: str, why: str | None) -> None:
    # Python flags link-local and unspecified ranges as private too; either way refused.
    got = forbidden_address(ip)
    assert (got is None) == (why is None)
    if why == "loopback":
        assert got == "loopback"


async def test_loopback_is_refused_by_default(site: str, ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match=r"127\.0\.0\.1 is a loopback address.*allow_private"):
        await WebFetchTool().run({"url": site + "/page"}, ctx)
    with pytest.raises(ToolError, match="loopback"):
        port = site.rsplit(":", 1)[1]
        await WebFetchTool().run({"url": f"http://localhost:{port}/page"}, ctx)


async def test_only_http_urls(ctx: ToolContext) -> None:
    for url in ("file:///etc/passwd", "ftp://example.com/x", "nonsense"):
        with pytest.raises(ToolError, match="only http"):
            await WebFetchTool().run({"url": url}, ctx)


async def test_allowed_private_fetch_redirect_and_text(site: str, ctx: ToolContext) -> None:
    ctx.config.bot.tools.web_fetch.allow_private = True
    out = await WebFetchTool().run({"url": site + "/moved"}, ctx)
    assert out.startswith(f"status 200 from {site}/page")
    assert "# News\n\nRelease 1.2 is out & stable." in out
    assert "alert" not in out and "p{}" not in out


async def test_size_cap(site: str, ctx: ToolContext) -> None:
    ctx.config.bot.tools.web_fetch.allow_private = True
    ctx.config.bot.tools.web_fetch.max_bytes = 1024
    out = await WebFetchTool().run({"url": site + "/big"}, ctx)
    assert out.endswith("\n\n" + "y" * 1024 + "\n[... truncated at 1024 bytes]")


def test_html_becomes_markdown_the_model_can_read() -> None:
    page = (
        "<html><head><title>t</title></head><body><h2>Release notes</h2>"
        "<p>See <a href='https://example.org/1.2'>the <b>1.2</b> notes</a> &amp; more.</p>"
        "<ul><li>faster</li><li>smaller</li></ul><script>track()</script>"
        "<table><tr><th>os</th><th>ok</th></tr><tr><td>linux</td><td>yes</td></tr></table>"
        "</body></html>"
    )
    out = html_to_markdown(page)
    assert "## Release notes" in out
    assert "See [the **1.2** notes](https://example.org/1.2) & more." in out
    assert "- faster\n- smaller" in out
    assert "| linux | yes |" in out
    assert "track()" not in out and "\nt\n" not in out


@pytest.mark.parametrize(
    "markup", ["", "<", "<p><b>unclosed", "<<<>>>&&&;;", "<table><td>x</table>", "\x00<p>a"]
)
def test_broken_html_never_raises(markup: str) -> None:
    assert isinstance(html_to_markdown(markup), str)
