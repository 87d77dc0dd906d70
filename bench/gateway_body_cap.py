"""A real gateway's memory while a 200 MB POST goes to each HTTP entry point.

    uv run --all-extras --dev python bench/gateway_body_cap.py [--mb 200] [--at-once]

Starts ``vikingbot gateway`` (Feishu against the loopback fake platform, the webhook
channel, a gateway token for the control API, the dashboard) and streams a ``--mb`` MB
body to ``/feishu/events``, ``/webhook/inbound``, ``/api/v1/chat`` and ``/ui/login``,
one after another (``--at-once``: all four together). Prints the gateway's RSS before
and its peak (VmHWM) after each. Target: no growth beyond the cap (1 MiB a request).
For the figure without the cap (the bare route reading its body whole) see
``bench/http_body_cap.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.fake_feishu import FakeFeishu
from tests.support.gateway_proc import GatewayProcess

PATHS = ("/feishu/events", "/webhook/inbound", "/api/v1/chat", "/ui/login")


def kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def body(mb: int) -> Iterator[bytes]:
    chunk = b"{" + b"x" * (1024 * 1024 - 1)
    for _ in range(mb):
        yield chunk


def post(url: str, mb: int, out: dict[str, str], home: Path) -> None:
    try:
        auth = {"Authorization": "Bearer tok-1"}
        if "/webhook/" in url:
            auth = {"Authorization": "Bearer hook-token-1"}
        elif "/api/" in url:  # the control API: its secret and the gateway token
            from vikingbot.gateway.control import TOKEN_HEADER

            secret = (home / "run" / "control.secret").read_text().strip()
            auth = {"Authorization": f"Bearer {secret}", TOKEN_HEADER.decode(): "tok-1"}
        answer = httpx.post(url, content=body(mb), timeout=300, headers=auth)
        out[url] = str(answer.status_code)
    except httpx.TransportError as exc:
        out[url] = f"closed ({type(exc).__name__})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--at-once", action="store_true")
    args = parser.parse_args()
    feishu = FakeFeishu()
    with tempfile.TemporaryDirectory() as tmp, feishu.serve() as domain:
        home = Path(tmp) / "home"
        home.mkdir()
        channels = {
            "cli": {"enabled": False},
            "webhook": {"enabled": True, "inboundToken": "hook-token-1"},
            "feishu": {
                "enabled": True,
                "appId": feishu.app_id,
                "appSecret": feishu.app_secret,
                "verificationToken": feishu.verification_token,
                "domain": domain,
            },
        }
        bot = {"channels": channels, "gateway": {"token": "tok-1", "shutdownGraceS": 2}}
        (home / "config.json").write_text(json.dumps({"bot": bot}))
        with GatewayProcess(home, fork=False) as gw:
            assert gw.proc is not None
            pid = gw.proc.pid
            start = kib(pid, "VmRSS:")
            print(f"gateway RSS at start: {start / 1024:.1f} MiB; a {args.mb} MB POST to each")
            urls = [gw.base_url + p for p in PATHS]
            said: dict[str, str] = {}
            if args.at_once:
                threads = [
                    threading.Thread(target=post, args=(u, args.mb, said, home)) for u in urls
                ]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                peak = kib(pid, "VmHWM:")
                print(f"all four at once: {sorted(said.values())}; peak RSS {peak / 1024:.1f} MiB "
                      f"(+{(peak - start) / 1024:.1f})")  # fmt: skip
            else:
                for url in urls:
                    post(url, args.mb, said, home)
                    peak = kib(pid, "VmHWM:")
                    print(f"{url.removeprefix(gw.base_url):18} answer {said[url]:24} peak RSS "
                          f"{peak / 1024:6.1f} MiB (+{(peak - start) / 1024:.1f})")  # fmt: skip
            print(f"gateway RSS at the end: {kib(pid, 'VmRSS:') / 1024:.1f} MiB; "
                  f"/health {gw.get('/health')['status']}")  # fmt: skip


if __name__ == "__main__":
    main()
