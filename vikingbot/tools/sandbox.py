"""An OS sandbox for ``exec``: bubblewrap (``bwrap``) on Linux.

``sandbox_argv(command, workspace, ...)`` gives the argv that runs a shell
command inside a sandbox where:

- the workspace is the only writable place (bound read-write at its own path,
  and the working folder);
- the rest of the file system is read-only (``/`` bound read-only);
- the places that hold secrets are hidden behind empty folders: the home
  folders (``/root``, ``/home``, ``$HOME``), vikingbot's home (config, ``.env``,
  state database, sessions) and ``/run`` (sockets such as Docker's or
  PostgreSQL's); ``/tmp`` is a fresh empty folder;
- there is no network (a network namespace with only a down loopback) unless
  ``network`` is allowed;
- every other namespace is new too (process ids, IPC, UTS, user), the command
  gets its own session (no terminal injection) and dies with vikingbot;
- the environment starts empty (``--clearenv``): only ``sandbox_env`` is set,
  i.e. ``PATH``, ``HOME`` (the workspace), ``TMPDIR`` (``/tmp``), the
  gateway's ``LANG`` / ``LC_*`` / ``TZ``, and what ``bot.tools.exec.env``
  names. API keys and tokens in the gateway's environment never reach it.

Not contained: reading world-readable files outside the hidden folders
(``/etc``, ``/usr``, other users' readable data under other paths), using CPU
and memory up to the timeout, and anything done with the network when it is
allowed. ``available()`` probes once whether ``bwrap`` exists and can create
its namespaces here (it cannot in some containers).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

HIDDEN = ("/root", "/home", "/run")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@functools.lru_cache(maxsize=1)
def available() -> str | None:
    """The path of a working ``bwrap``, or ``None`` (not installed, or namespaces refused)."""
    program = shutil.which("bwrap")
    if program is None:
        return None
    probe = [program, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return program if done.returncode == 0 else None


def unavailable_reason() -> str:
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed"
    return "bubblewrap (bwrap) cannot create its namespaces here (user namespaces are off)"


def sandbox_argv(
    command: str,
    workspace: Path,
    *,
    program: str,
    network: bool = False,
    hide: Sequence[Path] = (),
    env: Mapping[str, str] | None = None,
    shell: str = "/bin/sh",
) -> list[str]:
    """The argv that runs ``shell -c command`` in the sandbox described above."""
    ws = str(workspace.resolve())
    argv = [program, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for folder in _hidden(hide):
        argv += ["--tmpfs", folder]
    argv += ["--bind", ws, ws, "--chdir", ws, "--clearenv"]
    for name, value in sandbox_env(ws, env, os.environ).items():
        argv += ["--setenv", name, value]
    argv += ["--unshare-all", "--die-with-parent", "--new-session"]
    if network:
        argv.append("--share-net")
    return [*argv, "--", shell, "-c", command]


def sandbox_env(
    workspace: str, extra: Mapping[str, str] | None, environ: Mapping[str, str]
) -> dict[str, str]:
    """The whole environment of a sandboxed command (pure): the fixed names, then ``extra``."""
    env = {"PATH": environ.get("PATH") or DEFAULT_PATH, "HOME": workspace, "TMPDIR": "/tmp"}
    for name, value in sorted(environ.items()):
        if name in ("LANG", "TZ") or name.startswith("LC_"):
            env[name] = value
    env.update(extra or {})
    return env


def _hidden(extra: Sequence[Path]) -> list[str]:
    """Existing folders to hide, outermost first (a folder inside another hidden one is skipped)."""
    wanted = [*HIDDEN, os.environ.get("HOME", ""), *(str(p) for p in extra)]
    found: list[str] = []
    for raw in wanted:
        if not raw:
            continue
        try:
            path = str(Path(raw).resolve())
        except OSError:
            continue
        if path != "/" and os.path.isdir(path) and path not in found:
            found.append(path)
    found.sort(key=len)
    return [p for p in found if not any(p.startswith(q.rstrip("/") + "/") for q in found if q != p)]
