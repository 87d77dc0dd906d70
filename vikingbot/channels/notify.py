"""Push notifications through Apprise: outbound only (ntfy, Pushover, Gotify, Teams...).

``bot.channels.notify.targets`` names Apprise URLs; ``notify:<name>`` sends there (a
heartbeat, cron or ``message`` target, or ``bot.owner``). Every named target is a chat
the bot may send to (its name joins ``allow_from``). The URLs hold secrets: they are
``SecretStr`` in the config, and anything shown of them is Apprise's privacy form.

One push per outbox row. Apprise cuts the text to the service's limits by the
service's own rules (``?overflow=truncate`` unless the URL says otherwise, so a
push is never sent in parts a retry could repeat). A push Apprise reports as failed
raises :class:`ChannelError`: the outbox retries it with backoff, and after the last
try the row is failed and the result goes to the inbox, logged once.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from loguru import logger
from pydantic import Field, SecretStr, field_validator, model_validator

from vikingbot import redact
from vikingbot.bus import MessageBus
from vikingbot.channels.base import Channel, Problems
from vikingbot.config.schema import ChannelBase
from vikingbot.delivery.types import OutboundMessage
from vikingbot.errors import ChannelBusy, ChannelError, ChannelRejected

if TYPE_CHECKING:
    from apprise import Apprise

_NAME = re.compile(r"[A-Za-z0-9_.@+-]{1,128}")  # a target's chat id (delivery/targets.py)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,31}://\S+")
MAX_URL_CHARS = 2000


class NotifySettings(ChannelBase):
    """``bot.channels.notify``: named Apprise URLs, a title for every push, a timeout."""

    targets: dict[str, SecretStr] = Field(default_factory=dict)
    title: str = "vikingbot"
    timeout_s: float = Field(default=20.0, gt=0, le=300)
    #: Seconds between two pushes to one target; None keeps Apprise's own pace per
    #: service (5.5 s for most). A self-hosted ntfy needs none: 0.
    spacing_s: float | None = Field(default=None, ge=0, le=600)

    @field_validator("targets")
    @classmethod
    def _check_targets(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for name, url in value.items():
            if not _NAME.fullmatch(name):
                raise ValueError(f"target name {name!r}: expected 1-128 of A-Z a-z 0-9 _ . @ + -")
            text = url.get_secret_value()
            if len(text) > MAX_URL_CHARS or not _URL.fullmatch(text):
                raise ValueError(
                    f"target {name!r} is not an Apprise URL like ntfys://ntfy.sh/topic "
                    "(one scheme://..., no spaces)"
                )
        return value

    @field_validator("title")
    @classmethod
    def _check_title(cls, value: str) -> str:
        if len(value) > 250 or any(not c.isprintable() for c in value):
            raise ValueError("must be one line of printable text (at most 250 characters)")
        return value

    @model_validator(mode="after")
    def _targets_are_allowed(self) -> NotifySettings:
        missing = [name for name in self.targets if name not in self.allow_from]
        if missing:
            # object.__setattr__: no second round of validation for this derived value
            object.__setattr__(self, "allow_from", [*self.allow_from, *missing])
        return self


def _apprise() -> ModuleType:
    """The apprise module (imported on first use: it is slow to import, see bench/README.md)."""
    with _quiet():
        import apprise
    return apprise


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Apprise loads its plug-ins on first use; one imports ``imghdr``, which warns on
    Python 3.11-3.12 (Apprise's business, not the user's)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def _apprise_for(url: str, spacing_s: float | None = None) -> Apprise:
    """An Apprise object for one URL (overflow=truncate unless the URL chose); raises
    :class:`ChannelRejected` when Apprise does not know the URL."""
    apprise = _apprise()
    if "overflow=" not in url:
        url += ("&" if "?" in url else "?") + "overflow=truncate"
    found = apprise.Apprise()
    with _quiet():
        added = found.add(url)
    if not added:
        raise ChannelRejected("Apprise does not understand this URL (unknown service or bad form)")
    if spacing_s is not None:
        for service in found:
            service.request_rate_per_sec = spacing_s
    return found


def secret_pieces(url: str) -> set[str]:
    """The parts of an Apprise URL that may be secret (at least 4 characters each): user,
    password, path segments, query values, and the host when it is no host name (Apprise
    puts tokens there: ``pover://user@TOKEN``)."""
    rest = url.partition("://")[2]
    auth, at, hostpath = rest.rpartition("@") if "@" in rest.split("/", 1)[0] else ("", "", rest)
    host, _, tail = hostpath.partition("/")
    words = re.split(r"[/:?&=#]+", f"{auth}:{tail}") if at or tail else []
    name = host.partition(":")[0]
    if "." not in name and name != "localhost":  # pover://user@TOKEN, tgram://TOKEN/chat
        words.append(name)
    return {w for w in words if len(w) >= 4}


def _masked(text: str, url: str) -> str:
    for piece in sorted(secret_pieces(url), key=len, reverse=True):
        text = text.replace(piece, "***")
    return text


def shown(url: str) -> str:
    """A URL as it may be shown: its scheme and host, every other part masked."""
    return _masked(url.partition("?")[0], url)


class NotifyChannel(Channel):
    name: ClassVar[str] = "notify"
    settings: ClassVar[type[ChannelBase]] = NotifySettings
    max_message_chars: ClassVar[int | None] = None  # Apprise cuts to each service's limit
    outbound_only: ClassVar[bool] = True

    def __init__(self, config: ChannelBase, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        assert isinstance(config, NotifySettings)
        self.notify: NotifySettings = config
        self._apprise: dict[str, Apprise] = {}

    @classmethod
    def problems(cls, section: ChannelBase) -> Problems:
        assert isinstance(section, NotifySettings)
        if not section.targets:
            return Problems(["targets"], [])
        notes = []
        for name, url in section.targets.items():
            try:
                _apprise_for(url.get_secret_value())
            except ChannelRejected as exc:
                notes.append(f"target {name} ({shown(url.get_secret_value())}): {exc}")
        return Problems([], notes)

    async def start(self, bus: MessageBus) -> None:
        self._bus = bus  # outbound only: nothing is read
        broken = []
        for name, url in self.notify.targets.items():
            redact.remember(secret_pieces(url.get_secret_value()))  # masked in every log line
            try:
                self._apprise[name] = _apprise_for(url.get_secret_value(), self.notify.spacing_s)
            except ChannelRejected as exc:
                broken.append(f"{name}: {exc}")
        if broken:
            self.last_error = "; ".join(broken)
            logger.error("notify: unusable targets: {}", self.last_error)

    async def stop(self) -> None:
        self._apprise.clear()
        self._bus = None

    @property
    def receiving(self) -> bool:
        return False

    async def send(self, msg: OutboundMessage) -> None:
        markdown = _apprise().NotifyFormat.MARKDOWN
        target = self._apprise.get(msg.chat_id)
        if target is None:
            known = ", ".join(sorted(self.notify.targets)) or "none"
            raise ChannelRejected(f"notify: no usable target {msg.chat_id!r} (targets: {known})")
        result = await target.async_notify(
            body=msg.text,
            title=self.notify.title,
            body_format=markdown,
            timeout=self.notify.timeout_s,
        )
        if result:
            self.last_error = None
            return
        said = "; ".join(str(getattr(e, "message", e)) for e in result.logs())
        said = _masked(said, self.notify.targets[msg.chat_id].get_secret_value())[-500:]
        text = f"notify: push to {msg.chat_id} failed: {said or 'no detail from Apprise'}"
        self.last_error = text
        if "429" in said or "Too Many Requests" in said:
            raise ChannelBusy(text, None)
        raise ChannelError(text)

    @classmethod
    async def check_credentials(cls, section: ChannelBase) -> str | None:
        """``doctor --live``: a test push to every target; :class:`ChannelError` on failure."""
        assert isinstance(section, NotifySettings)
        channel = cls(section)
        await channel.start(MessageBus())
        if channel.last_error:
            raise ChannelRejected(channel.last_error)
        text = "A test push from `vikingbot doctor --live`."
        for name in section.targets:
            await channel.send(OutboundMessage(cls.name, name, text))
        return f"test push sent to {', '.join(section.targets) or 'no target'}"
