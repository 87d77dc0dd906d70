"""The ``exec`` tool: run a shell command in the workspace, bounded and guarded.

Guards, in order: the built-in deny patterns (``DEFAULT_DENY``: wiping disks
and filesystems, recursive deletes of ``/``, ``~`` or ``*``, fork bombs,
shutdown), then ``bot.tools.exec.deny_patterns`` (regular expressions, matched
case-insensitively), then, with ``restrict_to_workspace``, a path check that
refuses ``..`` and absolute paths outside the workspace. The guards are a seat
belt against a confused model, not a sandbox. The sandbox is ``tools.sandbox``
(bubblewrap): with ``bot.tools.exec.sandbox`` ``unattended`` (the default) every
exec in an unattended turn runs in it, and is refused where none is available;
``always`` does the same for every turn. The command runs through ``vikingbot.proc`` with the
workspace as its working folder, in its own process group, killed (with all it
started) on ``timeout_s`` or when it ends; output (stdout and stderr
together) is capped at ``max_output_chars``.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, ClassVar

from vikingbot import proc
from vikingbot.config.paths import home_dir
from vikingbot.errors import SpawnError, ToolError
from vikingbot.tools import sandbox
from vikingbot.tools.base import Tool, ToolContext
from vikingbot.tools.paths import is_inside

_RM_TARGET = r"(?:/|/\*|~|~/|~/\*|\$HOME|\$\{HOME\}|\*|\.|\./\*|\.\.|/[a-z]+)"
_CMD = r"(?:^|[;&|(`]\s*|\$\(\s*|\bsudo\s+|\bexec\s+)"  # a word in command position
DEFAULT_DENY: dict[str, str] = {
    "recursive delete of /, ~, * or a system folder": (
        r"\brm\s+(?:-[^\s]*\s+)*(?:-[a-z]*r[a-z]*|--recursive)\s+(?:-[^\s]*\s+)*"
        rf"[\"']?{_RM_TARGET}[\"']?(?:\s|$|;|&|\|)"
    ),
    "rm --no-preserve-root": r"--no-preserve-root",
    "making a filesystem": r"\bmkfs(?:\.\w+)?\b",
    "raw disk copy (dd)": r"\bdd\s+[^|;&]*\b(?:if|of)=",
    "writing to a raw disk device": r">\s*/dev/(?:sd|nvme|hd|vd|xvd|mmcblk|disk)",
    "wiping a disk": r"\b(?:wipefs|shred|blkdiscard)\b",
    "partitioning a disk": r"\b(?:fdisk|sfdisk|parted|gdisk|diskpart)\b",
    "a fork bomb": r":\s*\(\s*\)\s*\{[^}]*:\s*\|\s*:",
    "shutting down or rebooting": (
        rf"{_CMD}(?:shutdown|reboot|poweroff|halt)\b|{_CMD}init\s+[06]\b|"
        r"\bsystemctl\s+(?:poweroff|reboot|halt)\b"
    ),
    "recursive chmod/chown of /": r"\bch(?:mod|own)\s+(?:-[^\s]*\s+)*-[a-z]*R[a-z]*\s+\S+\s+/(?:\s|$)",
    "formatting a drive": r"\bformat\s+[a-z]:",
}

_ALLOWED_ABS = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/stdin")
_ABS_PATH = re.compile(r"""(?:^|[\s=:'"(<>|;&])(/[^\s'";|&<>()]*)""")
_DOTDOT = re.compile(r"""(?:^|[\s/=:'"(])\.\.(?:/|[\s'";|&)]|$)""")


def denied(command: str, extra: list[str]) -> str | None:
    """Why ``command`` is refused by the deny lists, or None. Pure."""
    for why, pattern in DEFAULT_DENY.items():
        if re.search(pattern, command, re.IGNORECASE):
            return f"blocked: {why} is never run by the agent"
    for pattern in extra:
        try:
            if re.search(pattern, command, re.IGNORECASE):
                return f"blocked by bot.tools.exec.deny_patterns entry {pattern!r}"
        except re.error:
            # A bad user pattern must not open the gate: refuse, and say why.
            return f"bot.tools.exec.deny_patterns entry {pattern!r} is not a valid regex"
    return None


def escapes_workspace(command: str, workspace: Path) -> str | None:
    """Why ``command`` reaches outside ``workspace`` (``..``, outside absolute paths), or None."""
    if _DOTDOT.search(command):
        return "blocked: '..' paths are not allowed (bot.tools.exec.restrict_to_workspace)"
    for m in _ABS_PATH.finditer(command):
        path = m.group(1)
        if path in _ALLOWED_ABS:
            continue
        if not is_inside(workspace, Path(path).resolve()):
            return (
                f"blocked: {path} is outside the workspace (bot.tools.exec.restrict_to_workspace)"
            )
    return None


class ExecTool(Tool):
    name = "exec"
    description = (
        "Run a shell command in the workspace folder and return its exit code and output "
        "(stdout and stderr together). Destructive commands are refused."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The shell command."},
            "timeout_s": {"type": "number", "description": "Lower the configured timeout."},
        },
        "required": ["command"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        cfg = ctx.config.bot.tools.exec
        command = str(args["command"]).strip()
        if not command:
            raise ToolError("exec: empty command")
        reason = denied(command, cfg.deny_patterns)
        if reason is None and cfg.restrict_to_workspace:
            reason = escapes_workspace(command, ctx.workspace)
        if reason:
            raise ToolError(f"exec: {reason}")
        timeout = cfg.timeout_s
        if args.get("timeout_s"):
            timeout = min(timeout, max(0.1, float(args["timeout_s"])))
        ctx.workspace.mkdir(parents=True, exist_ok=True)
        argv = await _contained(command, ctx)
        cap = cfg.max_output_chars
        try:
            done = await proc.run(
                argv, cwd=ctx.workspace, timeout_s=timeout, max_output=cap * 4, merge_stderr=True
            )
        except SpawnError as exc:
            raise ToolError(f"exec: {exc}") from exc
        out = done.text
        if len(out) > cap or done.stdout_dropped:
            more = max(0, len(out) - cap) + done.stdout_dropped
            out = out[:cap] + f"\n[... output truncated: about {more} more characters]"
        if done.timed_out:
            return f"timed out after {timeout:g}s and was killed\n{out}".rstrip()
        return f"exit code: {done.returncode}\n{out}".rstrip()


async def _contained(command: str, ctx: ToolContext) -> str | list[str]:
    """The command as run: in the sandbox when the policy asks for one; refused without one."""
    cfg = ctx.config.bot.tools.exec
    if cfg.sandbox == "off" or (cfg.sandbox == "unattended" and not ctx.unattended):
        return command
    program = await asyncio.to_thread(sandbox.available)
    if program is None:
        who = "unattended turns" if cfg.sandbox == "unattended" else "every turn"
        raise ToolError(
            f"exec: refused: {who} run commands only in an OS sandbox, and "
            f"{sandbox.unavailable_reason()}; install bubblewrap (apt install bubblewrap) "
            "or change bot.tools.exec.sandbox"
        )
    return sandbox.sandbox_argv(
        command,
        ctx.workspace,
        program=program,
        network=cfg.sandbox_network,
        hide=[home_dir()],
        env=cfg.env,
    )
