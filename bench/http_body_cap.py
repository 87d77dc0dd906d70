"""Memory of an HTTP server given a 200 MB POST on each gateway entry point, capped or not.

    uv run --all-extras --dev python bench/http_body_cap.py [--mb 200]

A child process serves (uvicorn, as the gateway does) routes at the gateway's entry
points (``/feishu/events``, ``/webhook/inbound``, ``/api/v1/chat``, ``/ui/login``) whose
handlers read the body whole (``request.body()``, as the Feishu route and the control API
do), once wrapped in the gateway's ``BodyCap`` and once bare (the baseline). The bench
streams a 200 MB POST to each and prints the child's peak RSS growth (VmHWM). Target
with the cap: no growth beyond the cap (1 MiB).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.ports import free_ports  # noqa: E402

PATHS = ("/feishu/events", "/webhook/inbound", "/api/v1/chat", "/ui/login")
SERVER = """
import sys, uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from vikingbot.gateway.bodycap import BodyCap

async def read(request):
    return JSONResponse({"bytes": len(await request.body())})

app = Starlette(routes=[Route(p, read, methods=["POST"]) for p in sys.argv[3].split(",")])
uvicorn.run(BodyCap(app) if sys.argv[2] == "capped" else app, host="127.0.0.1",
            port=int(sys.argv[1]), log_level="error")
"""


def rss_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def body(mb: int) -> Iterator[bytes]:
    chunk = b"x" * (1024 * 1024)
    for _ in range(mb):
        yield chunk


def run(mode: str, mb: int) -> None:
    (port,) = free_ports(1)
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port), mode, ",".join(PATHS)])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.post(f"http://127.0.0.1:{port}{PATHS[0]}", content=b"{}", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        base = rss_kib(proc.pid, "VmRSS:")
        for path in PATHS:
            try:
                answer = httpx.post(f"http://127.0.0.1:{port}{path}", content=body(mb), timeout=120)
                said: object = answer.status_code
            except httpx.TransportError as exc:
                said = f"closed ({type(exc).__name__})"
            peak = rss_kib(proc.pid, "VmHWM:")
            print(
                f"{mode:8} {path:18} answer {said!s:24} peak RSS {peak / 1024:7.1f} MiB "
                f"(+{(peak - base) / 1024:6.1f} MiB over {base / 1024:.1f} at start)"
            )
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200)
    args = parser.parse_args()
    print(f"a {args.mb} MB POST to each entry point, one after another")
    run("bare", args.mb)
    run("capped", args.mb)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
