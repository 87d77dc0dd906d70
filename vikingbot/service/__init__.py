"""Running the gateway as a user service: a systemd user unit on Linux, a LaunchAgent
on macOS. ``units`` writes the files (pure), ``manager`` installs, removes and asks
the service manager about them (``vikingbot service ...``)."""
