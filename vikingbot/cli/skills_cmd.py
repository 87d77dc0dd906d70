"""`vikingbot skills list | show | add | remove`: the skills a workspace's agent sees.

Skills are files, so these commands read and write them directly, gateway or not: a running
gateway sees a change on its next turn (docs/skills.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vikingbot.cli.common import fail, get_config, print_json, workspace_in

if TYPE_CHECKING:
    from vikingbot.skills.types import Catalog, Skill

app = typer.Typer(no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")]
WorkspaceOpt = Annotated[
    str | None,
    typer.Option(
        "--workspace",
        "-w",
        help="A workspace's folder name (default: the terminal chat's workspace).",
    ),
]


def _folders(ctx: typer.Context, workspace: str | None) -> tuple[Path, Path]:
    """(the user's skills folder, the workspace folder)."""
    from vikingbot.skills.discover import user_dir

    config, paths = get_config(ctx)
    return user_dir(paths.home), workspace_in(config, paths, workspace)


def skill_json(skill: Skill) -> dict[str, Any]:
    return {
        "name": skill.name,
        "description": skill.description,
        "source": skill.source,
        "folder": str(skill.folder),
    }


def catalog_json(found: Catalog, workspace: Path) -> dict[str, Any]:
    """The `skills list --json` object."""
    return {
        "workspace": str(workspace),
        "skills": [skill_json(s) for s in found.skills],
        "shadowed": [skill_json(s) for s in found.shadowed],
        "problems": [
            {
                "folder": str(p.folder),
                "source": p.source,
                "problem": p.message,
                "skipped": p.skipped,
            }
            for p in found.problems
        ],
    }


@app.command("list")
def list_cmd(ctx: typer.Context, workspace: WorkspaceOpt = None, json: JsonOpt = False) -> None:
    """Every skill the workspace's agent sees (name, description, where from) and every
    skill that was skipped or capped, with why."""
    from vikingbot.skills.discover import catalog

    user, ws = _folders(ctx, workspace)
    found = catalog(workspace=ws, user=user)
    data = catalog_json(found, ws)
    if json:
        print_json(data)
        return
    from vikingbot.cli.tables import Col, print_table

    shadowed = {s.name for s in found.shadowed}
    rows = [
        [
            s.name,
            s.source + (" (over user's)" if s.name in shadowed else ""),
            s.description,
        ]
        for s in found.skills
    ]
    print_table(
        f"Skills ({user}, {ws / 'skills'})",
        [Col("skill"), Col("from"), Col("description", wrap=True)],
        rows,
        empty="no skills",
    )
    for p in found.problems:
        mark = "skipped" if p.skipped else "capped"
        typer.echo(f"{mark}: {p.folder}: {p.message}", err=True)


@app.command("show")
def show_cmd(
    ctx: typer.Context, name: str, workspace: WorkspaceOpt = None, json: JsonOpt = False
) -> None:
    """One skill: its front matter, its instructions and the files beside them."""
    from vikingbot.skills.discover import catalog
    from vikingbot.skills.prompt import body, other_files

    user, ws = _folders(ctx, workspace)
    found = catalog(workspace=ws, user=user)
    skill = found.get(name)
    if skill is None:
        known = ", ".join(found.names) or "none"
        fail(f"there is no skill {name!r} (skills: {known}); see vikingbot skills list")
    text, problem = body(skill)
    if text is None:
        fail(f"{skill.file}: {problem}")
    files, more = other_files(skill)
    if json:
        print_json(
            {
                **skill_json(skill),
                "fields": dict(skill.fields),
                "body": text,
                "files": files,
                "more_files": more,
            }
        )
        return
    typer.echo(f"{skill.name} ({skill.source} skill, {skill.folder})")
    for key, value in skill.fields:
        if key not in ("name", "description"):
            typer.echo(f"{key}: {value}  (shown, never obeyed)")
    typer.echo(f"description: {skill.description}\n")
    typer.echo(text)
    if files:
        typer.echo("\nfiles: " + ", ".join(files) + (f" and {more} more" if more else ""))


@app.command("add")
def add_cmd(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="A skill folder (with SKILL.md) to copy.")],
    workspace: WorkspaceOpt = None,
    json: JsonOpt = False,
) -> None:
    """Copy a skill folder into your skills (or, with --workspace, one workspace's), after
    checking it as the agent would read it."""
    from vikingbot.skills.discover import workspace_dir
    from vikingbot.skills.manage import SkillError, add

    user, ws = _folders(ctx, workspace)
    target = user if workspace is None else workspace_dir(ws)
    try:
        skill, problem = add(path, target, "user" if workspace is None else "workspace")
    except SkillError as exc:
        fail(str(exc))
    if json:
        print_json({**skill_json(skill), "problem": problem.message if problem else None})
        return
    typer.echo(f"added skill {skill.name} to {skill.folder}")
    if problem:
        typer.echo(f"note: {problem.message}", err=True)


@app.command("remove")
def remove_cmd(
    ctx: typer.Context,
    name: str,
    workspace: WorkspaceOpt = None,
    json: JsonOpt = False,
) -> None:
    """Delete one of your skills (or, with --workspace, one of that workspace's)."""
    from vikingbot.skills.discover import workspace_dir
    from vikingbot.skills.manage import SkillError, remove

    user, ws = _folders(ctx, workspace)
    target = user if workspace is None else workspace_dir(ws)
    try:
        gone = remove(name, target)
    except SkillError as exc:
        fail(str(exc))
    if json:
        print_json({"removed": str(gone)})
        return
    typer.echo(f"removed {gone}")
