"""The ``file`` checker on real files: work when files match, signature moves on change."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vikingbot.config.schema import CheckerConfig


def files(path: str | Path, **options: object) -> CheckerConfig:
    return CheckerConfig.model_validate({"kind": "file", "path": str(path), **options})


async def test_no_matching_file_is_no_work(run, tmp_path: Path) -> None:
    result = await run(files(tmp_path / "inbox" / "*.eml"))
    assert not result.has_work
    assert result.error is None
    assert result.signature


async def test_matching_files_are_work_and_listed(run, tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "a.eml").write_text("hello")
    (inbox / "b.txt").write_text("ignored")
    result = await run(files(inbox / "*.eml"))
    assert result.has_work
    assert str(inbox / "a.eml") in (result.context or "")
    assert "b.txt" not in (result.context or "")


async def test_signature_changes_on_add_edit_and_remove(run, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    first = notes / "one.md"
    first.write_text("alpha")
    config = files(notes / "*.md")

    base = (await run(config)).signature
    assert (await run(config)).signature == base

    (notes / "two.md").write_text("beta")
    added = (await run(config)).signature
    assert added != base

    # same size and the same modification time: only the content differs
    stat = first.stat()
    first.write_text("ALPHA")
    os.utime(first, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    edited = (await run(config)).signature
    assert edited not in (base, added)

    (notes / "two.md").unlink()
    removed = (await run(config)).signature
    assert removed not in (base, added, edited)


async def test_a_directory_means_every_file_below_it(run, tmp_path: Path) -> None:
    deep = tmp_path / "drop" / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "report.pdf").write_bytes(b"%PDF")
    result = await run(files(tmp_path / "drop"))
    assert result.has_work
    assert "report.pdf" in (result.context or "")


async def test_recursive_glob(run, tmp_path: Path) -> None:
    (tmp_path / "x" / "y").mkdir(parents=True)
    (tmp_path / "x" / "y" / "todo.md").write_text("- [ ] call Bob")
    result = await run(files(f"{tmp_path}/**/*.md"))
    assert result.has_work
    assert "todo.md" in (result.context or "")


async def test_home_is_expanded(run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "status.txt").write_text("degraded")
    result = await run(files("~/status.txt"))
    assert result.has_work
    assert str(tmp_path / "status.txt") in (result.context or "")


async def test_scope_selects_the_path(run, tmp_path: Path) -> None:
    (tmp_path / "alpha").mkdir()
    (tmp_path / "alpha" / "new.txt").write_text("x")
    (tmp_path / "beta").mkdir()
    config = files(f"{tmp_path}/{{scope}}/*.txt")
    alpha = await run(config, "alpha")
    beta = await run(config, "beta")
    assert alpha.has_work and not beta.has_work
    assert alpha.signature != beta.signature


async def test_a_relative_path_is_refused(run) -> None:
    result = await run(files("notes/*.md"), name="notes")
    assert result.failed_open
    assert "bot.heartbeat.checkers.notes.path" in (result.error or "")
