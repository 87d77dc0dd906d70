"""Who may use the dashboard: login tokens, session cookies, CSRF, security headers.

Every dashboard path needs a session cookie, on loopback too: any local process
could otherwise drive the gateway. A session starts at ``/ui/login`` with
- a one-time login token (``vikingbot dashboard`` asks the gateway for one with
  the per-home control secret and prints/opens the link; it works once, for two
  minutes), or
- the control secret itself, or the gateway token (``bot.gateway.token``, what a
  user of a gateway bound beyond loopback knows), typed into the login form.

The cookie is HttpOnly, SameSite=Strict, Path=/ui (Secure over https). Each
session has a CSRF token; every state-changing request must carry it (form field
``csrf`` or header ``X-CSRF-Token``) or is refused with 403. Sessions live in
the gateway's memory: a restart logs everyone out.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

COOKIE = "vb_session"
SESSION_TTL_S = 7 * 24 * 3600
LOGIN_TOKEN_TTL_S = 120.0
MAX_SESSIONS = 200

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    # same-origin, not no-referrer: with no-referrer browsers send ``Origin: null`` on the
    # dashboard's own POSTs, which the gateway's Origin check (gateway/webguard.py) refuses
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


def read_secret(path: Path) -> str | None:
    """The per-home control secret, or None when there is none (yet)."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


@dataclass
class Session:
    csrf: str
    expires: float


@dataclass
class Auth:
    """In-memory sessions and one-time login tokens."""

    secrets_: Callable[[], list[str]]  # what a login may present (control secret, gateway token)
    now: Callable[[], float] = time.monotonic
    sessions: dict[str, Session] = field(default_factory=dict)
    login_tokens: dict[str, float] = field(default_factory=dict)

    def secret_ok(self, given: str) -> bool:
        ok = False
        for s in self.secrets_():
            if s and hmac.compare_digest(given.encode(), s.encode()):
                ok = True
        return ok

    def issue_login_token(self) -> str:
        self._expire()
        token = secrets.token_urlsafe(24)
        self.login_tokens[token] = self.now() + LOGIN_TOKEN_TTL_S
        return token

    def login(self, given: str, *, one_time_only: bool = False) -> tuple[str, Session] | None:
        """A new session for a valid one-time token or (unless ``one_time_only``, as for a
        token in a URL) a secret; None otherwise."""
        self._expire()
        if not given or len(given) > 500:
            return None
        one_time = self.login_tokens.pop(given, None)
        if one_time is None and (one_time_only or not self.secret_ok(given)):
            return None
        if len(self.sessions) >= MAX_SESSIONS:  # drop the oldest
            oldest = min(self.sessions, key=lambda k: self.sessions[k].expires)
            del self.sessions[oldest]
        sid = secrets.token_urlsafe(32)
        session = Session(csrf=secrets.token_urlsafe(24), expires=self.now() + SESSION_TTL_S)
        self.sessions[sid] = session
        return sid, session

    def session(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        found = self.sessions.get(sid)
        if found is None or found.expires < self.now():
            self.sessions.pop(sid, None)
            return None
        return found

    def logout(self, sid: str | None) -> None:
        if sid:
            self.sessions.pop(sid, None)

    def _expire(self) -> None:
        now = self.now()
        for k in [k for k, t in self.login_tokens.items() if t < now]:
            del self.login_tokens[k]


def csrf_ok(session: Session, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(session.csrf.encode(), (given or "").encode())
