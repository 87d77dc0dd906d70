"""The workspace template: where it lives and how a workspace is filled from it.

A wheel ships the template inside the package as ``vikingbot/workspace_template``;
a source checkout has it at the repository's top level. Filling copies every
template file that the workspace does not have yet and never touches a file
that exists (not even an empty one or a dangling symlink).
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from loguru import logger

from vikingbot.errors import WorkspaceError

TEMPLATE_DIR_NAME = "workspace_template"
_SKIP_PARTS = frozenset({"__pycache__", ".DS_Store"})


def template_dir() -> Path:
    """The template folder: the packaged copy if there is one, else the repo's."""
    try:
        packaged = resources.files("vikingbot").joinpath(TEMPLATE_DIR_NAME)
        if isinstance(packaged, Path) and packaged.is_dir():
            return packaged
    except (ModuleNotFoundError, NotADirectoryError):
        pass
    repo = Path(__file__).resolve().parents[2] / TEMPLATE_DIR_NAME
    if repo.is_dir():
        return repo
    raise WorkspaceError(
        f"workspace template not found (looked for vikingbot/{TEMPLATE_DIR_NAME} "
        f"in the package and {repo}); reinstall vikingbot"
    )


def template_files(template: Path) -> list[Path]:
    """Template files relative to ``template``, sorted."""
    found: list[Path] = []
    for path in template.rglob("*"):
        rel = path.relative_to(template)
        if path.is_file() and not _SKIP_PARTS.intersection(rel.parts):
            found.append(rel)
    return sorted(found)


def fill(workspace: Path, template: Path | None = None) -> list[Path]:
    """Copy missing template files into ``workspace``; return the ones created.

    A file that already exists is left exactly as it is. Creation uses
    exclusive open, so a file written by someone else at the same moment wins.
    """
    template = template if template is not None else template_dir()
    if not template.is_dir():
        raise WorkspaceError(f"workspace template folder {template} does not exist")
    created: list[Path] = []
    for rel in template_files(template):
        dest = workspace / rel
        if dest.exists() or dest.is_symlink():
            continue
        data = (template / rel).read_bytes()
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        except OSError as exc:
            raise WorkspaceError(f"cannot create {dest} from the template: {exc}") from exc
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        created.append(dest)
    if created:
        logger.info("workspace {}: created {} from the template", workspace, len(created))
    return created
