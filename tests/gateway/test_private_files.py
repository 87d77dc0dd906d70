"""Files the gateway writes are its user's only (``vikingbot/private.py``)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path


def test_state_db_and_logs_are_0600_and_old_ones_are_tightened(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "logs").mkdir(parents=True)
    old_log = data / "logs" / "vikingbot.log"
    old_log.write_text("old\n")
    old_log.chmod(0o644)
    script = (
        "import sqlite3, sys\n"
        "from pathlib import Path\n"
        "from vikingbot.private import keep_private\n"
        "data = Path(sys.argv[1]); keep_private(data)\n"
        "sqlite3.connect(data / 'state.db').execute('create table t (x)').connection.commit()\n"
        "(data / 'logs' / 'mcp-x.log').write_text('new')\n"
        "(data / 'sessions').mkdir()\n"
        "from vikingbot.fsutil import locked_edit\n"
        "locked_edit(data / 'sessions' / 'HEARTBEAT.md', lambda text: 'edited')\n"
    )
    subprocess.run([sys.executable, "-c", script, str(data)], check=True, timeout=60)
    modes = {
        p.relative_to(data).as_posix(): oct(p.stat().st_mode & 0o777)
        for p in [data, *data.rglob("*")]
    }
    assert modes == {
        ".": "0o700",
        "logs": "0o700",
        "logs/vikingbot.log": "0o600",
        "logs/mcp-x.log": "0o600",
        "state.db": "0o600",
        "sessions": "0o700",
        "sessions/HEARTBEAT.md": "0o600",
        "sessions/.HEARTBEAT.md.lock": "0o600",
    }
    assert sqlite3.connect(data / "state.db").execute("select count(*) from t").fetchone() == (0,)
    assert os.access(data / "state.db", os.R_OK)
