"""Print the import-structure figures of issue 15: import-linter contracts kept/broken and cycles.

Cycles are counted the way the issue counts them: lazy (function-level) and TYPE_CHECKING imports
included. For every package, its direct children (modules and subpackages, each with everything
below it) form a graph; every strongly connected group of two or more children is one cycle.

Also prints what adding a channel takes, read off the example plug-in
(examples/vikingbot-channel-example, which tests/channels/test_channel_plugin.py
installs and drives): its files, and how many vikingbot files name it (target 0).

Run: uv run --dev python bench/import_graph.py
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import grimp


def _children_graph(graph: grimp.ImportGraph, package: str) -> dict[str, set[str]]:
    children = sorted(graph.find_children(package))
    owner: dict[str, str] = {}
    for child in children:
        owner[child] = child
        for below in graph.find_descendants(child):
            owner[below] = child
    edges: dict[str, set[str]] = {child: set() for child in children}
    for importer, top in owner.items():
        for imported in graph.find_modules_directly_imported_by(importer):
            target = owner.get(imported)
            if target is not None and target != top:
                edges[top].add(target)
    return edges


def _strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; returns groups of two or more nodes."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(edges[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(edges[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def _contracts(*, strict: bool) -> tuple[int, int]:
    """(kept, broken) from lint-imports; ``strict`` drops every ``ignore_imports`` first."""
    import tempfile
    import tomllib

    config = tomllib.loads(Path("pyproject.toml").read_text(encoding="utf-8"))
    section = config["tool"]["importlinter"]
    lines = [f'root_package = "{section["root_package"]}"']
    for contract in section["contracts"]:
        lines.append("[[tool.importlinter.contracts]]")
        for key, value in contract.items():
            if strict and key in ("ignore_imports", "unmatched_ignore_imports_alerting"):
                continue
            lines.append(f"{key} = {_toml(value)}")
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as handle:
        handle.write("[tool.importlinter]\n" + "\n".join(lines) + "\n")
    lint = subprocess.run(
        [
            str(Path(sys.executable).with_name("lint-imports")),
            "--no-cache",
            "--config",
            handle.name,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    Path(handle.name).unlink()
    found = re.search(r"Contracts: (\d+) kept, (\d+) broken", lint.stdout)
    if found:
        return int(found.group(1)), int(found.group(2))
    kept_only = re.search(r"Contracts: (\d+) kept", lint.stdout)
    return (int(kept_only.group(1)), 0) if kept_only else (-1, -1)


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def _channel_plugin() -> tuple[list[str], list[str]]:
    """(the example channel plug-in's files, vikingbot files that mention its name)."""
    root = Path("examples/vikingbot-channel-example")
    files = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and p.suffix in (".py", ".toml") and "__pycache__" not in p.parts
    )
    name = "jsonl"  # the plug-in's entry-point name (its pyproject.toml)
    naming = sorted(
        str(p)
        for p in Path("vikingbot").rglob("*.py")
        if "testing" not in p.parts and f'"{name}"' in p.read_text(encoding="utf-8")
    )
    return files, naming


def main() -> int:
    started = time.perf_counter()
    graph = grimp.build_graph("vikingbot", cache_dir=None)
    packages = sorted(m for m in graph.modules if graph.find_children(m))
    cycles: list[tuple[str, list[str]]] = []
    for package in packages:
        for group in _strongly_connected(_children_graph(graph, package)):
            cycles.append((package, group))
    kept, broken = _contracts(strict=False)
    strict_kept, strict_broken = _contracts(strict=True)
    print(f"modules: {len(graph.modules)}  packages: {len(packages)}")
    print(f"import-linter contracts: {kept} kept, {broken} broken")
    print(
        f"import-linter contracts without the ignore_imports still listed: "
        f"{strict_kept} kept, {strict_broken} broken"
    )
    print(f"cycles (lazy and TYPE_CHECKING imports counted): {len(cycles)}")
    for package, group in cycles:
        short = ", ".join(name.rsplit(".", 1)[-1] for name in group)
        print(f"  in {package}: {short}")
    files, naming = _channel_plugin()
    print(f"adding a channel (the example plug-in): {len(files)} files: {', '.join(files)}")
    print(f"vikingbot files that had to name it: {len(naming)}")
    print(f"elapsed: {time.perf_counter() - started:.2f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
