"""The web dashboard: server-rendered pages on the gateway, under ``/ui``.

See docs/dashboard.md for users and docs/architecture.md for its structure.
"""

from vikingbot.dashboard.app import Dashboard
from vikingbot.dashboard.parts import DashboardParts
from vikingbot.dashboard.routes import dashboard_routes

__all__ = ["Dashboard", "DashboardParts", "dashboard_routes"]
