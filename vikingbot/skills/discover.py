"""Finding skills: ``<home>/skills/<name>/SKILL.md`` and ``<workspace>/skills/<name>/SKILL.md``.

``catalog(workspace=..., user=...)`` reads both folders into a ``Catalog``; a workspace skill
wins over a user skill of the same name. Bad input never stops the rest: each folder that
cannot be used becomes one ``SkillProblem`` (skipped, or capped and still loaded), and the
problems of a folder are logged once each time they change.

Files are read as the agent could have left them: the file is opened without blocking and must
be a regular file (a pipe or device is refused at once, ``agentio.open_regular``), at most
``MAX_SKILL_BYTES`` are read, the text must be UTF-8, and a symbolic link (the skill's folder or
its ``SKILL.md``) must stay inside its skills folder.

Every turn asks again, so a folder's result is kept against the identity of the folder and of
each ``SKILL.md`` in it (device, inode, size, mtime, ctime): an unchanged folder costs one
``lstat`` per skill. A result with a file changed within the last two seconds is not kept (a
second write within the file clock's granularity must not be missed).
"""

from __future__ import annotations

import codecs
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from loguru import logger

from vikingbot.agentio import open_regular
from vikingbot.errors import ToolError
from vikingbot.fsutil import BOM
from vikingbot.skills.frontmatter import split
from vikingbot.skills.names import name_problem
from vikingbot.skills.types import Catalog, Skill, SkillProblem, Source

SKILL_FILE = "SKILL.md"
MAX_SKILL_BYTES = 256 * 1024
MAX_DESCRIPTION = 1024
MAX_FOLDERS = 2000  # skill folders read per skills folder; the rest are counted in one problem
_SETTLED_NS = 2_000_000_000

Identity = tuple[int, int, int, int, int]


def user_dir(home: Path) -> Path:
    """The user's skills folder in a vikingbot home."""
    return home / "skills"


def workspace_dir(workspace: Path) -> Path:
    """A workspace's own skills folder."""
    return workspace / "skills"


def catalog(*, workspace: Path | None = None, user: Path | None = None) -> Catalog:
    """The skills a workspace sees: ``<workspace>/skills`` first, then the user's folder."""
    found: dict[str, Skill] = {}
    shadowed: list[Skill] = []
    problems: list[SkillProblem] = []
    for root, source in ((_ws(workspace), "workspace"), (user, "user")):
        if root is None:
            continue
        skills, trouble = scan(root, source)  # type: ignore[arg-type]
        problems.extend(trouble)
        for skill in skills:
            key = skill.name.casefold()
            if key in found:
                shadowed.append(skill)
            else:
                found[key] = skill
    ordered = tuple(sorted(found.values(), key=lambda s: s.name.casefold()))
    return Catalog(ordered, tuple(problems), tuple(shadowed))


def _ws(workspace: Path | None) -> Path | None:
    return workspace_dir(workspace) if workspace is not None else None


@dataclass(frozen=True, slots=True)
class _Scan:
    skills: tuple[Skill, ...]
    problems: tuple[SkillProblem, ...]
    looked: tuple[tuple[str, Identity | None], ...]  # SKILL.md paths and their identities
    root: Identity | None


_CACHE: dict[tuple[str, str], _Scan] = {}
_LOGGED: dict[str, frozenset[str]] = {}


def scan(root: Path, source: Source) -> tuple[tuple[Skill, ...], tuple[SkillProblem, ...]]:
    """The skills of one skills folder and what was wrong, from the cache when nothing changed."""
    key = (str(root), source)
    cached = _CACHE.get(key)
    if cached is not None and _unchanged(root, cached):
        return cached.skills, cached.problems
    result, settled = _scan(root, source)
    if settled:
        _CACHE[key] = result
    else:
        _CACHE.pop(key, None)
    _log_once(root, result.problems)
    return result.skills, result.problems


def _identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _lstat_id(path: str) -> Identity | None:
    try:
        return _identity(os.lstat(path))
    except OSError:
        return None


def _unchanged(root: Path, cached: _Scan) -> bool:
    if _lstat_id(str(root)) != cached.root:
        return False
    return all(_lstat_id(path) == ident for path, ident in cached.looked)


def _log_once(root: Path, problems: tuple[SkillProblem, ...]) -> None:
    seen = frozenset(p.message for p in problems)
    if _LOGGED.get(str(root)) == seen:
        return
    before = _LOGGED.get(str(root), frozenset())
    _LOGGED[str(root)] = seen
    for p in problems:
        if p.message not in before:
            logger.warning("skill {}: {}", p.folder, p.message)


def _scan(root: Path, source: Source) -> tuple[_Scan, bool]:
    """Read one skills folder (a missing one has no skills); whether the result may be kept."""
    now = time.time_ns()
    try:
        root_st = os.lstat(root)
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return _Scan((), (), (), _lstat_id(str(root))), True
    except OSError as exc:
        problem = SkillProblem(root, source, f"the skills folder cannot be read ({exc.strerror})")
        return _Scan((), (problem,), (), None), False
    folders = [e for e in entries if not e.name.startswith(".")]
    real_root = os.path.realpath(root)
    skills: list[Skill] = []
    problems: list[SkillProblem] = []
    looked: list[tuple[str, Identity | None]] = []
    names: dict[str, Path] = {}
    settled = _settled(root_st, now)
    for entry in folders[:MAX_FOLDERS]:
        folder = Path(entry.path)
        file = os.path.join(entry.path, SKILL_FILE)
        try:
            file_st: os.stat_result | None = os.lstat(file)
        except OSError:
            file_st = None
        looked.append((file, _identity(file_st) if file_st is not None else None))
        if file_st is not None and not _settled(file_st, now):
            settled = False
        skill, trouble = _one(folder, entry, real_root, source, file_st)
        if trouble is not None:
            problems.append(trouble)
        if skill is None:
            continue
        first = names.get(skill.name.casefold())
        if first is not None:
            problems.append(
                SkillProblem(
                    folder,
                    source,
                    f"another skill here is called {skill.name!r} too ({first.name}); "
                    "names must differ (ignoring case); this one is skipped",
                )
            )
            continue
        names[skill.name.casefold()] = folder
        skills.append(skill)
    if len(folders) > MAX_FOLDERS:
        problems.append(
            SkillProblem(
                root,
                source,
                f"{len(folders) - MAX_FOLDERS} more folders after the first {MAX_FOLDERS} "
                "are not read",
            )
        )
    result = _Scan(tuple(skills), tuple(problems), tuple(looked), _identity(root_st))
    return result, settled


def _settled(st: os.stat_result, now: int) -> bool:
    return now - max(st.st_mtime_ns, st.st_ctime_ns) > _SETTLED_NS


def _one(
    folder: Path,
    entry: os.DirEntry[str],
    real_root: str,
    source: Source,
    file_st: os.stat_result | None,
) -> tuple[Skill | None, SkillProblem | None]:
    """One folder: its skill, or why not (and a warning for a capped skill)."""

    def skip(message: str) -> tuple[None, SkillProblem]:
        return None, SkillProblem(folder, source, message)

    try:
        if not entry.is_dir():  # a plain file beside the skills (a README) is not a skill
            return None, None
    except OSError:
        return None, None
    if entry.is_symlink() and not _inside(os.path.realpath(entry.path), real_root):
        return skip(
            "is a symbolic link out of the skills folder; copy the skill in instead "
            "(vikingbot skills add PATH)"
        )
    if file_st is None:
        return skip(f"has no {SKILL_FILE} (the file name is upper case)")
    if stat.S_ISLNK(file_st.st_mode) and not _inside(
        os.path.realpath(folder / SKILL_FILE), real_root
    ):
        return skip(f"its {SKILL_FILE} is a symbolic link out of the skills folder")
    return check(folder, source)


def check(
    folder: Path, source: Source, name: str | None = None
) -> tuple[Skill | None, SkillProblem | None]:
    """Read ``folder/SKILL.md`` and check it as a skill called ``name`` (default: the folder's
    name): the skill (``None`` when skipped) and its problem, if any."""
    text, capped, problem = read_text(folder / SKILL_FILE)
    if text is None:
        return None, SkillProblem(folder, source, problem or "cannot be read")
    return _from_text(folder, source, text, capped, name or folder.name)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def read_text(file: Path) -> tuple[str | None, bool, str | None]:
    """A SKILL.md's text (at most ``MAX_SKILL_BYTES``), whether it was cut there, and why it
    could not be read."""
    try:
        fd = open_regular(file, SKILL_FILE)
    except ToolError as exc:
        return None, False, str(exc)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(MAX_SKILL_BYTES + 1)
    capped = len(data) > MAX_SKILL_BYTES
    data = data[:MAX_SKILL_BYTES]
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(data, final=not capped)
    except UnicodeDecodeError as exc:
        return None, False, f"{SKILL_FILE} is not valid UTF-8 ({exc.reason} at byte {exc.start})"
    return text.removeprefix(BOM), capped, None


def _from_text(
    folder: Path, source: Source, text: str, capped: bool, expected: str
) -> tuple[Skill | None, SkillProblem | None]:
    def skip(message: str) -> tuple[None, SkillProblem]:
        return None, SkillProblem(folder, source, message)

    fm = split(text)
    if fm.problems:
        return skip(
            fm.problems[0] + (f" (and {len(fm.problems) - 1} more)" if fm.problems[1:] else "")
        )
    name = fm.fields.get("name", "").strip()
    if not name:
        return skip("the front matter has no name:")
    why = name_problem(name)
    if why:
        return skip(why)
    if name != expected:
        return skip(f"name: {name!r} does not match its folder {expected!r}; rename one")
    description = " ".join(fm.fields.get("description", "").split())
    if not description:
        return skip("the front matter has no description: (what the skill is for, and when)")
    warnings: list[str] = []
    if len(description) > MAX_DESCRIPTION:
        warnings.append(
            f"description: is {len(description)} characters; the first {MAX_DESCRIPTION} are listed"
        )
        description = description[: MAX_DESCRIPTION - 1] + "…"
    if capped:
        warnings.append(f"{SKILL_FILE} is over {MAX_SKILL_BYTES} bytes; only that much is read")
    skill = Skill(name, description, folder.parent / name, source, tuple(fm.fields.items()))
    if warnings:
        return skill, SkillProblem(folder, source, "; ".join(warnings), skipped=False)
    return skill, None
