"""The CLI as the running gateway's client (issue 9), black-box: real processes, fakes.

- `heartbeat run-now` typed while the gateway runs goes through the gateway:
  the result reaches Telegram once, and the JSON says `via: gateway`, `delivered`.
- Two `run-now`s at once make one model call (the second finds the workspace busy).
- A second gateway on the same home exits 1 naming the first one's pid.
- The control API refuses a missing or forged secret (401, audited) and keeps serving.
"""

from __future__ import annotations

import json
import stat
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import pytest

from tests.support.fake_telegram import FakeTelegram
from tests.support.gateway_proc import GatewayProcess
from tests.support.home import OWNER_ID, TIMEOUT_S, Home, poll, with_tasks
from vikingbot.testing.fake_openai import FakeOpenAI, reply, tool_call

Start = Callable[[Home], GatewayProcess]


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Home, GatewayProcess]]:
    """One gateway for the tests that only look at it (a start costs ~1.5 s of CPU)."""
    telegram = FakeTelegram()
    with FakeOpenAI.start() as llm, telegram.serve() as api:
        home = Home(tmp_path_factory.mktemp("running") / "home", llm, telegram, api)
        home.write_config()
        gw = GatewayProcess(home.path, start_timeout_s=TIMEOUT_S).start()
        try:
            yield home, gw
        finally:
            gw.kill()


def first_cycle_done(home: Home) -> None:
    """The gateway's start-up cycle ran (it skips the template as empty)."""
    poll(lambda: any(r["reason"] == "empty" for r in home.ledger()), "the first cycle")


def test_run_now_goes_through_the_gateway_and_delivers_once(home: Home, gateways: Start) -> None:
    home.add_user_session()
    gw = gateways(home)
    first_cycle_done(home)
    home.write_heartbeat(with_tasks("- Check whether the VPS disk is over 90%"))
    home.llm.script([tool_call("message", {"text": "Disk at 93% on the VPS."}), "HEARTBEAT_OK"])

    res = home.cli("heartbeat", "run-now", "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    ran = [r for r in rows if r["decision"] == "run"]
    assert len(ran) == 1, rows
    assert ran[0]["via"] == "gateway"
    assert ran[0]["outcome"] == "delivered", ran[0]
    assert all(r["via"] == "gateway" for r in rows)
    assert "no gateway is running" not in res.stderr
    sent = home.telegram.wait_for_sent(1)
    assert [(m["chat_id"], m["text"]) for m in sent] == [(str(OWNER_ID), "Disk at 93% on the VPS.")]
    assert home.inbox() == []
    assert gw.stop() == 0
    assert len(home.telegram.sent) == 1


def test_without_a_gateway_run_now_says_so_and_reports_local(home: Home) -> None:
    home.add_user_session()
    home.write_heartbeat(with_tasks("- Check whether the VPS disk is over 90%"))
    home.llm.script([tool_call("message", {"text": "Disk at 93%."}), "HEARTBEAT_OK"])
    res = home.cli("heartbeat", "run-now", "--json")
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("no gateway is running: results stay in the inbox") == 1
    rows = json.loads(res.stdout)
    ran = [r for r in rows if r["decision"] == "run"]
    assert [(r["via"], r["outcome"]) for r in ran] == [("local", "inboxed")]
    assert [i.text for i in home.inbox()] == ["Disk at 93%."]


def test_two_concurrent_run_nows_make_one_model_call(home: Home, gateways: Start) -> None:
    home.add_user_session()
    gateways(home)
    first_cycle_done(home)
    home.write_heartbeat(with_tasks("- Check whether the VPS disk is over 90%"))
    # The model holds its answer until one of the two commands has finished: the
    # one that found the workspace claimed. However slowly each CLI starts, the
    # turn is still running when the other asks (no timing decides the order).
    home.llm.script([reply("HEARTBEAT_OK", delay_s=120)])

    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(home.cli, "heartbeat", "run-now", "--json") for _ in range(2)]
        done, _ = wait(runs, timeout=120, return_when=FIRST_COMPLETED)
        assert done, "neither run-now finished while the model held its answer"
        home.llm.release()
        results = [run.result() for run in runs]
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    rows = [row for r in results for row in json.loads(r.stdout) if row["workspace"] == "shared"]
    assert len(home.llm.requests) == 1
    assert sorted(r["decision"] for r in rows) == ["run", "skip"], rows
    assert [r["reason"] for r in rows if r["decision"] == "skip"] == ["busy"]


def test_second_gateway_on_the_same_home_exits_1_naming_the_first(
    running: tuple[Home, GatewayProcess],
) -> None:
    home, gw = running
    assert gw.proc is not None
    second = GatewayProcess(home.path)
    res = subprocess.run(
        [*second_cmd(second)], env=second.env, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 1
    assert f"pid {gw.proc.pid}" in res.stderr
    assert f"127.0.0.1:{gw.port}" in res.stderr
    assert gw.get("/health")["status"] == "ok"  # the first one is unharmed
    run = home.path / "run"
    assert stat.S_IMODE((run / "control.secret").stat().st_mode) == 0o600
    assert json.loads((run / "gateway.json").read_text())["pid"] == gw.proc.pid


def second_cmd(gw: GatewayProcess) -> list[str]:
    import sys

    return [sys.executable, "-m", "vikingbot", "gateway", "--port", str(gw.port)]


def test_a_killed_gateway_leaves_no_lock_behind(home: Home, gateways: Start) -> None:
    gw = gateways(home)
    gw.kill()  # SIGKILL: no clean-up code runs
    assert (home.path / "run" / "gateway.json").exists()  # stale, yet it blocks nothing
    res = home.cli("heartbeat", "status", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["via"] == "local"
    again = gateways(home)
    assert again.get("/health")["status"] == "ok"


def test_control_api_refuses_missing_and_forged_secrets(
    running: tuple[Home, GatewayProcess],
) -> None:
    home, gw = running
    url = gw.base_url + "/api/v1/heartbeat/status"
    for headers in ({}, {"Authorization": "Bearer forged"}):
        req = urllib.request.Request(url, headers=headers)
        try:
            urllib.request.urlopen(req, timeout=10)
        except urllib.error.HTTPError as exc:
            assert exc.code == 401
            assert "control secret" in json.loads(exc.read())["error"]
        else:
            raise AssertionError(f"{headers} was let in")
    assert gw.get("/health")["status"] == "ok"
    secret = (home.path / "run" / "control.secret").read_text().strip()
    assert secret not in gw.read_output()
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {secret}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert json.loads(resp.read())["enabled"] is True
    from vikingbot.store.db import StateStore

    def refused() -> list[dict[str, object]]:
        store = StateStore.open(home.database_url)
        try:
            return store.audit_events(action="control.auth")
        finally:
            store.close()

    audited = poll(lambda: refused() if len(refused()) >= 2 else None, "the refusals audited")
    assert len(audited) == 2  # the secret let in was not audited as refused
    assert {e["outcome"] for e in audited} == {"refused"}


def test_plan_asks_the_running_gateway_and_sees_an_edit(home: Home, gateways: Start) -> None:
    """`heartbeat plan` while a gateway runs: planned from the gateway's watched view."""
    home.add_user_session()
    gw = gateways(home)
    first_cycle_done(home)
    summary = home.cli("heartbeat", "plan")
    assert summary.returncode == 0, summary.stderr
    assert "1 workspace," in summary.stdout and "empty" in summary.stdout
    home.write_heartbeat(with_tasks("- Check whether the VPS disk is over 90%"))

    def shared_runs() -> bool:
        rows = home.cli_json("heartbeat", "plan")
        return any(r["workspace"] == "shared" and r["decision"] == "run" for r in rows)

    poll(shared_runs, "the edit in the gateway's plan")
    assert home.llm.requests == []  # planning never calls the model
    assert gw.stop() == 0


def test_the_address_is_published_before_the_port_accepts(home: Home) -> None:
    """A client that can connect can always find the gateway (run/gateway.json)."""
    import socket
    import sys
    import time

    gw = GatewayProcess(home.path)
    info = home.path / "run" / "gateway.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "vikingbot", "gateway", "--port", str(gw.port)],
        env=gw.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "the gateway exited"
            assert time.monotonic() < deadline, "the gateway never listened"
            try:
                socket.create_connection(("127.0.0.1", gw.port), timeout=1).close()
            except OSError:
                time.sleep(0.002)
                continue
            break
        assert info.exists(), "the port accepted before run/gateway.json was written"
        assert json.loads(info.read_text())["pid"] == proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_run_now_shortcut_prints_what_the_full_command_prints(home: Home, gateways: Start) -> None:
    """`heartbeat run-now --json` skips Typer (vikingbot/cli/launch.py); `--config`
    before it goes through Typer: the same rows, both via the gateway."""
    home.add_user_session()
    gateways(home)
    first_cycle_done(home)
    home.write_heartbeat(with_tasks("- Check whether the VPS disk is over 90%"))
    home.llm.script(["HEARTBEAT_OK", "HEARTBEAT_OK"])
    fast = home.cli("heartbeat", "run-now", "--json", "-w", "shared")
    full = home.cli(
        "--config", str(home.path / "config.json"), "heartbeat", "run-now", "--json", "-w", "shared"
    )
    assert fast.returncode == 0 and full.returncode == 0, (fast.stderr, full.stderr)
    fast_rows, full_rows = json.loads(fast.stdout), json.loads(full.stdout)
    assert [sorted(r) for r in fast_rows] == [sorted(r) for r in full_rows]
    for rows in (fast_rows, full_rows):
        assert [(r["workspace"], r["decision"], r["outcome"], r["via"]) for r in rows] == [
            ("shared", "run", "noop", "gateway")
        ]
    assert len(home.llm.requests) == 2
