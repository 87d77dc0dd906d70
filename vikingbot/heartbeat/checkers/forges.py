"""The ``github`` and ``gitlab`` checkers: review requests and assigned issues.

Both talk to the forge's REST API with a token from the ``token`` option
(``${NAME}`` allowed) or the environment (``GITHUB_TOKEN`` / ``GITLAB_TOKEN``).
The token is sent only to ``api_base`` and never appears in a result, an
error or a log line. There is work when the list is non-empty; the signature
hashes each item's id and ``updated_at``, so a new or updated item is news.

Scopes: github ``prs`` (default: open PRs awaiting my review) and ``issues``
(open issues assigned to me); gitlab ``mr`` (default: open merge requests I am
a reviewer of) and ``issues`` (open issues assigned to me). Only the first
page (100 items) is looked at.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from vikingbot.errors import CheckerError
from vikingbot.heartbeat.checkers.base import Checker, CheckResult, signature_of, tls_context

if TYPE_CHECKING:
    import httpx

PAGE_SIZE = 100
_LISTED = 30


@dataclass(frozen=True)
class ForgeItem:
    id: str
    updated_at: str
    ref: str
    title: str
    repo: str
    url: str

    def line(self) -> str:
        return f"{self.ref} {self.title} ({self.repo}) {self.url}"


class _ForgeChecker(Checker):
    """What both forges share: options, token, one authenticated GET."""

    label: ClassVar[str]
    default_api_base: ClassVar[str]
    token_env: ClassVar[str]
    options = frozenset({"api_base", "token", "user"})

    def validate(self) -> None:
        super().validate()
        base = self.opt_str("api_base", self.default_api_base)
        if not base.startswith(("http://", "https://")):
            raise CheckerError(f"{self.where}.api_base: expected an http:// or https:// URL")
        self.opt_str("token")
        self.opt_str("user")

    @property
    def api_base(self) -> str:
        return self.opt_str("api_base", self.default_api_base).rstrip("/")

    def token(self) -> str:
        configured = self.opt_str("token")
        token = (
            self.resolve(configured, what="token")
            if configured
            else self.environ.get(self.token_env, "")
        )
        if not token:
            raise CheckerError(
                f"no {self.label} token: set {self.where}.token "
                f"or the {self.token_env} environment variable"
            )
        self.secrets.add(token)
        return token

    def missing(self) -> str | None:
        try:
            self.token()
        except CheckerError as exc:
            return str(exc)
        return None

    def auth_headers(self, token: str) -> dict[str, str]:
        raise NotImplementedError

    async def get_json(self, client: httpx.AsyncClient, path: str, params: dict[str, Any]) -> Any:
        import httpx

        url = f"{self.api_base}{path}"
        try:
            response = await client.get(url, params=params)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise CheckerError(
                f"{self.where}: cannot reach {self.label} at {self.api_base}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if response.status_code in (401, 403):
            raise CheckerError(
                f"{self.where}: {self.label} refused the token "
                f"(HTTP {response.status_code} for GET {path}); check its scopes and expiry"
            )
        if not response.is_success:
            raise CheckerError(
                f"{self.where}: {self.label} GET {path} returned HTTP {response.status_code}"
            )
        try:
            return response.json()
        except ValueError as exc:
            raise CheckerError(
                f"{self.where}: {self.label} GET {path} did not return JSON"
            ) from exc

    async def fetch(self, client: httpx.AsyncClient, scope: str) -> list[ForgeItem]:
        raise NotImplementedError

    async def check(self, scope: str | None) -> CheckResult:
        import httpx

        chosen = self.require_scope(scope)
        headers = {"User-Agent": "vikingbot-checker", **self.auth_headers(self.token())}
        async with httpx.AsyncClient(
            headers=headers,
            timeout=self.config.timeout_s,
            follow_redirects=False,
            verify=tls_context(),
        ) as client:
            items = await self.fetch(client, chosen)
        signature = signature_of(*sorted(f"{i.id}\0{i.updated_at}" for i in items))
        if not items:
            return CheckResult(has_work=False, signature=signature)
        newest = sorted(items, key=lambda i: i.updated_at, reverse=True)
        lines = [f"{len(items)} {self.describe(chosen)}:"]
        lines += [f"- {item.line()}" for item in newest[:_LISTED]]
        if len(items) > _LISTED:
            lines.append(f"- ... and {len(items) - _LISTED} more")
        return CheckResult(has_work=True, signature=signature, context="\n".join(lines))

    def describe(self, scope: str) -> str:
        raise NotImplementedError


def _expect_list(value: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise CheckerError(f"{where}: unexpected response shape (expected a list of objects)")
    return value


class GitHubChecker(_ForgeChecker):
    kind = "github"
    label = "GitHub"
    default_api_base = "https://api.github.com"
    token_env = "GITHUB_TOKEN"
    scopes = ("prs", "issues")

    def auth_headers(self, token: str) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        }

    def describe(self, scope: str) -> str:
        return (
            "open pull request(s) awaiting your review"
            if scope == "prs"
            else ("open issue(s) assigned to you")
        )

    async def fetch(self, client: httpx.AsyncClient, scope: str) -> list[ForgeItem]:
        if scope == "prs":
            who = self.opt_str("user") or "@me"
            data = await self.get_json(
                client,
                "/search/issues",
                {"q": f"is:open is:pr review-requested:{who}", "per_page": PAGE_SIZE},
            )
            raw = _expect_list(data.get("items") if isinstance(data, dict) else None, self.where)
        elif user := self.opt_str("user"):
            data = await self.get_json(
                client,
                "/search/issues",
                {"q": f"is:open is:issue assignee:{user}", "per_page": PAGE_SIZE},
            )
            raw = _expect_list(data.get("items") if isinstance(data, dict) else None, self.where)
        else:
            data = await self.get_json(
                client, "/issues", {"filter": "assigned", "state": "open", "per_page": PAGE_SIZE}
            )
            raw = _expect_list(data, self.where)
        return [_github_item(i) for i in raw if "pull_request" not in i or scope == "prs"]


def _github_item(raw: dict[str, Any]) -> ForgeItem:
    repo = raw.get("repository")
    if isinstance(repo, dict) and repo.get("full_name"):
        name = str(repo["full_name"])
    else:  # search results carry only repository_url: .../repos/OWNER/NAME
        name = "/".join(str(raw.get("repository_url", "")).rstrip("/").split("/")[-2:])
    return ForgeItem(
        id=str(raw.get("id", "")),
        updated_at=str(raw.get("updated_at", "")),
        ref=f"#{raw.get('number', '?')}",
        title=str(raw.get("title", "")),
        repo=name,
        url=str(raw.get("html_url", "")),
    )


class GitLabChecker(_ForgeChecker):
    kind = "gitlab"
    label = "GitLab"
    default_api_base = "https://gitlab.com/api/v4"
    token_env = "GITLAB_TOKEN"
    scopes = ("mr", "issues")

    def auth_headers(self, token: str) -> dict[str, str]:
        return {"PRIVATE-TOKEN": token}

    def describe(self, scope: str) -> str:
        return (
            "open merge request(s) awaiting your review"
            if scope == "mr"
            else ("open issue(s) assigned to you")
        )

    async def fetch(self, client: httpx.AsyncClient, scope: str) -> list[ForgeItem]:
        params: dict[str, Any] = {"state": "opened", "per_page": PAGE_SIZE}
        if scope == "mr":
            user = self.opt_str("user")
            if user:
                params["reviewer_username"] = user
            else:
                me = await self.get_json(client, "/user", {})
                if not isinstance(me, dict) or "id" not in me:
                    raise CheckerError(f"{self.where}: GitLab /user did not say who you are")
                params["reviewer_id"] = me["id"]
            params["scope"] = "all"
            raw = _expect_list(await self.get_json(client, "/merge_requests", params), self.where)
            return [_gitlab_item(i, "!") for i in raw]
        if user := self.opt_str("user"):
            params.update(scope="all", assignee_username=user)
        else:
            params["scope"] = "assigned_to_me"
        raw = _expect_list(await self.get_json(client, "/issues", params), self.where)
        return [_gitlab_item(i, "#") for i in raw]


def _gitlab_item(raw: dict[str, Any], sigil: str) -> ForgeItem:
    refs = raw.get("references")
    full = str(refs.get("full", "")) if isinstance(refs, dict) else ""
    repo = full.rsplit(sigil, 1)[0] if sigil in full else str(raw.get("project_id", ""))
    return ForgeItem(
        id=str(raw.get("id", "")),
        updated_at=str(raw.get("updated_at", "")),
        ref=f"{sigil}{raw.get('iid', '?')}",
        title=str(raw.get("title", "")),
        repo=repo,
        url=str(raw.get("web_url", "")),
    )
