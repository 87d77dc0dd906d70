#!/usr/bin/env python3
"""A stand-in for ``systemctl`` / ``launchctl`` on the PATH: records each call (one JSON
line in $FAKE_MANAGER_LOG) and keeps the service's state in a file beside it.
``$FAKE_MANAGER_DOWN=1`` answers like a machine without a user manager."""

import json
import os
import sys
from pathlib import Path

log = Path(os.environ["FAKE_MANAGER_LOG"])
state_file = log.with_suffix(".state")
args = sys.argv[1:]
with log.open("a") as fh:
    fh.write(json.dumps([os.environ["FAKE_MANAGER_NAME"], *args]) + "\n")
if os.environ.get("FAKE_MANAGER_DOWN") == "1":
    print("Failed to connect to bus: No medium found")
    sys.exit(1)
state = json.loads(state_file.read_text()) if state_file.exists() else {}
words = [a for a in args if a != "--user"]
verb = words[0] if words else ""
if verb in ("enable",):
    state["UnitFileState"] = "enabled"
elif verb in ("restart", "start", "bootstrap"):
    state.update(ActiveState="active", SubState="running", MainPID="4242")
elif verb in ("disable", "bootout"):
    state.update(ActiveState="inactive", SubState="dead", MainPID="0", UnitFileState="disabled")
elif verb == "show":
    print("LoadState=loaded")
    for key in ("ActiveState", "SubState", "MainPID", "UnitFileState"):
        print(f"{key}={state.get(key, 'unknown')}")
elif verb == "print" and "/" in words[-1] and "/" in words[-1].split("/", 1)[1]:
    print(f"state = {state.get('ActiveState', 'not running')}")
    print(f"pid = {state.get('MainPID', '0')}")
state_file.write_text(json.dumps(state))
