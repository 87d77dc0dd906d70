"""The ``github`` and ``gitlab`` checkers against fake forge APIs on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict

import pytest

from tests.support.fake_forges import FakeGitHub, FakeGitLab
from vikingbot.config.schema import CheckerConfig
from vikingbot.heartbeat.checkers import CheckResult

GH_TOKEN = "ghp_fakeTokenValue123"
GL_TOKEN = "glpat-fakeTokenValue456"


@pytest.fixture(scope="module")
def github_server() -> Iterator[tuple[FakeGitHub, str]]:
    fake = FakeGitHub(token=GH_TOKEN, login="octo")
    with fake.serve() as api_base:
        yield fake, api_base


@pytest.fixture(scope="module")
def gitlab_server() -> Iterator[tuple[FakeGitLab, str]]:
    fake = FakeGitLab(token=GL_TOKEN, login="tanuki", user_id=99)
    with fake.serve() as api_base:
        yield fake, api_base


@pytest.fixture
def github(github_server: tuple[FakeGitHub, str]) -> tuple[FakeGitHub, str]:
    github_server[0].reset()
    return github_server


@pytest.fixture
def gitlab(gitlab_server: tuple[FakeGitLab, str]) -> tuple[FakeGitLab, str]:
    gitlab_server[0].reset()
    return gitlab_server


def forge(kind: str, api_base: str, **options: object) -> CheckerConfig:
    return CheckerConfig.model_validate({"kind": kind, "apiBase": api_base, **options})


def assert_no_token(result: CheckResult, *tokens: str) -> None:
    for value in asdict(result).values():
        for token in tokens:
            assert token not in str(value)


# -- GitHub -----------------------------------------------------------------


async def test_github_prs_awaiting_my_review(run, github) -> None:
    fake, api = github
    fake.add_pr(7, "Fix login", repo="octo/app")
    fake.add_pr(9, "Bump deps", repo="octo/lib", updated_at="2026-01-06T09:00:00Z")
    fake.add_pr(11, "Someone else's review", reviewer="hubot")
    fake.add_issue(3, "An issue, not a PR")
    result = await run(forge("github", api), "prs", {"GITHUB_TOKEN": GH_TOKEN})
    assert result.has_work and result.error is None
    lines = (result.context or "").splitlines()
    assert lines[0] == "2 open pull request(s) awaiting your review:"
    assert lines[1] == "- #9 Bump deps (octo/lib) https://github.example/octo/lib/pull/9"
    assert lines[2] == "- #7 Fix login (octo/app) https://github.example/octo/app/pull/7"
    seen = fake.requests[-1]
    assert seen.headers["authorization"] == f"Bearer {GH_TOKEN}"
    assert "review-requested:@me" in seen.query["q"]


async def test_github_defaults_to_prs(run, github) -> None:
    fake, api = github
    fake.add_pr(7, "Fix login")
    result = await run(forge("github", api), None, {"GITHUB_TOKEN": GH_TOKEN})
    assert result.has_work
    assert "#7 Fix login" in (result.context or "")


async def test_github_issues_assigned_to_me_without_prs(run, github) -> None:
    fake, api = github
    fake.add_issue(3, "Crash on start", repo="octo/app")
    fake.add_issue(4, "Not mine", assignee="hubot")
    fake.add_pr(7, "A PR is not an issue")
    result = await run(forge("github", api), "issues", {"GITHUB_TOKEN": GH_TOKEN})
    assert result.has_work
    assert (result.context or "").splitlines() == [
        "1 open issue(s) assigned to you:",
        "- #3 Crash on start (octo/app) https://github.example/octo/app/issues/3",
    ]


async def test_github_user_option(run, github) -> None:
    fake, api = github
    fake.add_pr(5, "For alice", reviewer="alice")
    fake.add_issue(6, "Alice's bug", assignee="alice")
    env = {"GITHUB_TOKEN": GH_TOKEN}
    prs = await run(forge("github", api, user="alice"), "prs", env)
    issues = await run(forge("github", api, user="alice"), "issues", env)
    assert "#5 For alice" in (prs.context or "")
    assert "#6 Alice's bug" in (issues.context or "")


async def test_github_signature_moves_with_news_only(run, github) -> None:
    fake, api = github
    env = {"GITHUB_TOKEN": GH_TOKEN}
    config = forge("github", api)
    empty = await run(config, "prs", env)
    assert not empty.has_work and empty.error is None

    fake.add_pr(7, "Fix login")
    one = await run(config, "prs", env)
    assert (await run(config, "prs", env)).signature == one.signature

    fake.touch(7, "2026-01-07T08:00:00Z")
    updated = await run(config, "prs", env)
    fake.add_pr(8, "Second")
    two = await run(config, "prs", env)
    fake.remove(7)
    fake.remove(8)
    gone = await run(config, "prs", env)
    signatures = [empty.signature, one.signature, updated.signature, two.signature]
    assert len(set(signatures)) == 4
    assert not gone.has_work and gone.signature == empty.signature


async def test_github_token_from_a_reference(run, github) -> None:
    fake, api = github
    fake.add_pr(7, "Fix login")
    config = forge("github", api, token="${WORK_GH}")
    result = await run(config, "prs", {"WORK_GH": GH_TOKEN, "GITHUB_TOKEN": "wrong-token"})
    assert result.has_work and result.error is None


async def test_a_missing_token_fails_open_without_calling_the_api(run, github) -> None:
    fake, api = github
    result = await run(forge("github", api), "prs", {})
    assert result.has_work and result.failed_open
    assert "GITHUB_TOKEN" in (result.error or "")
    assert fake.requests == []


async def test_a_rejected_token_fails_open_and_is_never_shown(run, github, log_lines) -> None:
    fake, api = github
    fake.token = "the-real-token"
    result = await run(forge("github", api, fail="open"), "prs", {"GITHUB_TOKEN": GH_TOKEN})
    assert result.failed_open
    assert "refused the token (HTTP 401" in (result.error or "")
    assert_no_token(result, GH_TOKEN)
    assert not any(GH_TOKEN in line for line in log_lines)


async def test_an_unknown_scope_fails_open_listing_the_known_ones(run, github) -> None:
    _, api = github
    result = await run(forge("github", api), "mr", {"GITHUB_TOKEN": GH_TOKEN})
    assert result.failed_open
    assert "unknown scope 'mr'" in (result.error or "")
    assert "prs, issues" in (result.error or "")


async def test_a_server_error_with_fail_closed_skips(run, github) -> None:
    fake, api = github
    fake.status = 502
    result = await run(forge("github", api, fail="closed"), "prs", {"GITHUB_TOKEN": GH_TOKEN})
    assert not result.has_work and not result.failed_open
    assert "HTTP 502" in (result.error or "")


async def test_a_slow_forge_times_out(run, github) -> None:
    fake, api = github
    fake.delay_s = 0.6
    result = await run(forge("github", api, timeoutS=0.2), "prs", {"GITHUB_TOKEN": GH_TOKEN})
    assert result.failed_open
    assert "timed out" in (result.error or "") or "Timeout" in (result.error or "")


# -- GitLab -----------------------------------------------------------------


async def test_gitlab_merge_requests_i_review(run, gitlab) -> None:
    fake, api = gitlab
    fake.add_mr(12, "Add caching", project="group/app")
    fake.add_mr(13, "Not for me", reviewer="someone")
    fake.add_issue(4, "Issue, not MR")
    result = await run(forge("gitlab", api), "mr", {"GITLAB_TOKEN": GL_TOKEN})
    assert result.has_work and result.error is None
    assert (result.context or "").splitlines() == [
        "1 open merge request(s) awaiting your review:",
        "- !12 Add caching (group/app) https://gitlab.example/group/app/-/merge_requests/12",
    ]
    assert [r.path for r in fake.requests] == ["/api/v4/user", "/api/v4/merge_requests"]
    assert fake.requests[-1].query["reviewer_id"] == "99"
    assert all(r.headers["private-token"] == GL_TOKEN for r in fake.requests)


async def test_gitlab_defaults_to_mr_and_user_skips_the_lookup(run, gitlab) -> None:
    fake, api = gitlab
    fake.add_mr(21, "For bob", reviewer="bob")
    result = await run(forge("gitlab", api, user="bob"), None, {"GITLAB_TOKEN": GL_TOKEN})
    assert "!21 For bob" in (result.context or "")
    assert [r.path for r in fake.requests] == ["/api/v4/merge_requests"]


async def test_gitlab_issues_assigned_to_me(run, gitlab) -> None:
    fake, api = gitlab
    fake.add_issue(4, "Flaky pipeline", project="group/infra")
    fake.add_issue(5, "Someone else's", assignee="bob")
    result = await run(forge("gitlab", api), "issues", {"GITLAB_TOKEN": GL_TOKEN})
    assert (result.context or "").splitlines() == [
        "1 open issue(s) assigned to you:",
        "- #4 Flaky pipeline (group/infra) https://gitlab.example/group/infra/-/issues/4",
    ]


async def test_gitlab_signature_stable_then_moving(run, gitlab) -> None:
    fake, api = gitlab
    env = {"GITLAB_TOKEN": GL_TOKEN}
    fake.add_mr(12, "Add caching")
    first = await run(forge("gitlab", api), "mr", env)
    again = await run(forge("gitlab", api), "mr", env)
    fake.touch(12, "2026-02-01T10:00:00Z")
    moved = await run(forge("gitlab", api), "mr", env)
    assert first.signature == again.signature != moved.signature


async def test_gitlab_tokens_never_leak(run, gitlab, log_lines) -> None:
    fake, api = gitlab
    env = {"GITLAB_TOKEN": GL_TOKEN}
    results = [await run(forge("gitlab", api), "mr", env)]
    fake.token = "another"
    results.append(await run(forge("gitlab", api), "mr", env))
    fake.status = 500
    results.append(await run(forge("gitlab", api), "issues", env))
    results.append(await run(forge("gitlab", "http://127.0.0.1:9/api/v4"), "mr", env))
    results.append(await run(forge("gitlab", api), "nope", env))
    assert [r.failed_open for r in results] == [False, True, True, True, True]
    for result in results:
        assert_no_token(result, GL_TOKEN)
    assert not any(GL_TOKEN in line for line in log_lines)


async def test_gitlab_missing_token_names_the_variable(run, gitlab) -> None:
    _, api = gitlab
    result = await run(forge("gitlab", api), "mr", {"GITHUB_TOKEN": GH_TOKEN}, name="work")
    assert result.failed_open
    assert "bot.heartbeat.checkers.work.token" in (result.error or "")
    assert "GITLAB_TOKEN" in (result.error or "")
