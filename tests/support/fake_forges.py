"""Fake GitHub and GitLab REST APIs on loopback, with data tests script between calls.

    gh = FakeGitHub(token="t0ken")
    gh.add_pr(7, "Fix login", repo="octo/app")
    with gh.serve() as api_base:           # pass as the checker's api_base
        ...
        gh.add_pr(8, "Another")            # visible on the next request

Both check the auth header like the real services (401 otherwise), answer only
the endpoints the checkers use, and are strict about the query (400 for a
request the real API would answer with something unexpected). ``status`` forces
an HTTP status for every request; ``delay_s`` makes every answer slow. To share one server between tests, serve
it once and call ``reset()`` before each test.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vikingbot.testing.server import serve_app

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

DEFAULT_UPDATED = "2026-01-05T12:00:00Z"


@dataclass
class SeenRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]


@dataclass
class _Fake:
    token: str = "fake-forge-token"
    login: str = "octo"
    user_id: int = 4242
    status: int | None = None
    delay_s: float = 0.0
    items: list[dict[str, Any]] = field(default_factory=list)
    requests: list[SeenRequest] = field(default_factory=list)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1001))

    def __post_init__(self) -> None:
        self._identity = (self.token, self.login, self.user_id)

    def reset(self) -> None:
        """Back to the state after construction (for a server shared by many tests)."""
        self.token, self.login, self.user_id = self._identity
        self.status = None
        self.delay_s = 0.0
        self.items = []
        self.requests = []

    def touch(self, ref: int, updated_at: str) -> None:
        """Change an item's ``updated_at`` (its number / iid is ``ref``)."""
        for item in self.items:
            if item.get("number", item.get("iid")) == ref:
                item["updated_at"] = updated_at
                return
        raise KeyError(ref)

    def remove(self, ref: int) -> None:
        self.items = [i for i in self.items if i.get("number", i.get("iid")) != ref]

    def _authorised(self, request: Request) -> bool:
        raise NotImplementedError

    def _routes(self) -> list[Any]:
        raise NotImplementedError

    def app(self) -> Any:
        from starlette.applications import Starlette

        return Starlette(routes=self._routes())

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Serve on loopback; yields the ``api_base`` to configure."""
        with serve_app(self.app()) as base_url:
            yield base_url + self.base_path

    base_path = ""

    async def _gate(self, request: Request) -> Response | None:
        from starlette.responses import JSONResponse

        self.requests.append(
            SeenRequest(
                request.method,
                request.url.path,
                dict(request.query_params),
                {k.lower(): v for k, v in request.headers.items()},
            )
        )
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.status is not None:
            return JSONResponse({"message": "scripted failure"}, status_code=self.status)
        if not self._authorised(request):
            return JSONResponse({"message": "Bad credentials"}, status_code=401)
        return None

    @staticmethod
    def _public(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in i.items() if not k.startswith("_")} for i in items]


class FakeGitHub(_Fake):
    def _authorised(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        return header in (f"Bearer {self.token}", f"token {self.token}")

    def _item(
        self, number: int, title: str, repo: str, updated_at: str, kind: str, who: str | None
    ) -> dict[str, Any]:
        item: dict[str, Any] = {
            "id": next(self._ids),
            "number": number,
            "title": title,
            "state": "open",
            "html_url": f"https://github.example/{repo}/{kind}/{number}",
            "repository_url": f"https://api.github.example/repos/{repo}",
            "updated_at": updated_at,
            "_repo": repo,
            "_who": who or self.login,
        }
        if kind == "pull":
            item["pull_request"] = {
                "url": f"https://api.github.example/repos/{repo}/pulls/{number}"
            }
        return item

    def add_pr(
        self,
        number: int,
        title: str,
        *,
        repo: str = "octo/app",
        updated_at: str = DEFAULT_UPDATED,
        reviewer: str | None = None,
    ) -> dict[str, Any]:
        """An open PR with a review requested from ``reviewer`` (default: the token's user)."""
        item = self._item(number, title, repo, updated_at, "pull", reviewer)
        self.items.append(item)
        return item

    def add_issue(
        self,
        number: int,
        title: str,
        *,
        repo: str = "octo/app",
        updated_at: str = DEFAULT_UPDATED,
        assignee: str | None = None,
    ) -> dict[str, Any]:
        """An open issue assigned to ``assignee`` (default: the token's user)."""
        item = self._item(number, title, repo, updated_at, "issues", assignee)
        self.items.append(item)
        return item

    def _routes(self) -> list[Any]:
        from starlette.routing import Route

        return [Route("/search/issues", self._search), Route("/issues", self._issues)]

    async def _search(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if (refused := await self._gate(request)) is not None:
            return refused
        pairs = [t.split(":", 1) for t in request.query_params.get("q", "").split() if ":" in t]
        terms = {k: v for k, v in pairs if k != "is"}
        is_values = {v for k, v in pairs if k == "is"}
        if "open" not in is_values:
            return JSONResponse({"message": "fake needs is:open"}, status_code=422)
        if "review-requested" in terms and "pr" in is_values:
            who, want_pr = terms["review-requested"], True
        elif "assignee" in terms and "issue" in is_values:
            who, want_pr = terms["assignee"], False
        else:
            return JSONResponse({"message": "fake: unsupported query"}, status_code=422)
        who = self.login if who == "@me" else who
        found = [i for i in self.items if i["_who"] == who and ("pull_request" in i) == want_pr]
        items = self._public(found)
        for item in items:
            item.pop("repository", None)
        return JSONResponse(
            {"total_count": len(items), "incomplete_results": False, "items": items}
        )

    async def _issues(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if (refused := await self._gate(request)) is not None:
            return refused
        q = request.query_params
        if q.get("filter") != "assigned" or q.get("state") != "open":
            return JSONResponse({"message": "fake needs filter=assigned&state=open"}, 400)
        # like the real endpoint: assigned issues *and* pull requests, with full repository
        found = [i for i in self.items if i["_who"] == self.login]
        items = self._public(found)
        for item, raw in zip(items, found, strict=True):
            item["repository"] = {"full_name": raw["_repo"]}
        return JSONResponse(items)


class FakeGitLab(_Fake):
    base_path = "/api/v4"

    def _authorised(self, request: Request) -> bool:
        return request.headers.get("private-token") == self.token

    def _item(
        self, iid: int, title: str, project: str, updated_at: str, sigil: str, who: str | None
    ) -> dict[str, Any]:
        path = "merge_requests" if sigil == "!" else "issues"
        return {
            "id": next(self._ids),
            "iid": iid,
            "project_id": 77,
            "title": title,
            "state": "opened",
            "web_url": f"https://gitlab.example/{project}/-/{path}/{iid}",
            "updated_at": updated_at,
            "references": {"full": f"{project}{sigil}{iid}"},
            "_who": who or self.login,
            "_mr": sigil == "!",
        }

    def add_mr(
        self,
        iid: int,
        title: str,
        *,
        project: str = "group/app",
        updated_at: str = DEFAULT_UPDATED,
        reviewer: str | None = None,
    ) -> dict[str, Any]:
        item = self._item(iid, title, project, updated_at, "!", reviewer)
        self.items.append(item)
        return item

    def add_issue(
        self,
        iid: int,
        title: str,
        *,
        project: str = "group/app",
        updated_at: str = DEFAULT_UPDATED,
        assignee: str | None = None,
    ) -> dict[str, Any]:
        item = self._item(iid, title, project, updated_at, "#", assignee)
        self.items.append(item)
        return item

    def _routes(self) -> list[Any]:
        from starlette.routing import Route

        return [
            Route("/api/v4/user", self._user),
            Route("/api/v4/merge_requests", self._merge_requests),
            Route("/api/v4/issues", self._issues),
        ]

    async def _user(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if (refused := await self._gate(request)) is not None:
            return refused
        return JSONResponse({"id": self.user_id, "username": self.login})

    async def _merge_requests(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if (refused := await self._gate(request)) is not None:
            return refused
        q = request.query_params
        if q.get("state") != "opened":
            return JSONResponse({"message": "fake needs state=opened"}, 400)
        if q.get("reviewer_id") == str(self.user_id):
            who = self.login
        elif q.get("reviewer_username"):
            who = q["reviewer_username"]
        else:
            return JSONResponse({"message": "fake needs reviewer_id or reviewer_username"}, 400)
        found = [i for i in self.items if i["_mr"] and i["_who"] == who]
        return JSONResponse(self._public(found))

    async def _issues(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if (refused := await self._gate(request)) is not None:
            return refused
        q = request.query_params
        if q.get("state") != "opened":
            return JSONResponse({"message": "fake needs state=opened"}, 400)
        if q.get("scope") == "assigned_to_me":
            who = self.login
        elif q.get("assignee_username"):
            who = q["assignee_username"]
        else:
            return JSONResponse({"message": "fake needs an assignee filter"}, 400)
        found = [i for i in self.items if not i["_mr"] and i["_who"] == who]
        return JSONResponse(self._public(found))
