"""``bot.channels.email``: the email channel's settings, checked when the config is set."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator

from vikingbot.channels.mail.address import check_address, clean_subject
from vikingbot.config.schema import ChannelBase
from vikingbot.errors import ChannelRejected

Security = Literal["tls", "starttls", "none"]


def _address(value: str, what: str) -> str:
    try:
        return check_address(value, what)
    except ChannelRejected as exc:
        raise ValueError(str(exc)) from None


class EmailSettings(ChannelBase):
    """The common channel keys plus the mailbox: IMAP in, SMTP out.

    ``allow_from`` and ``owner_chat`` hold addresses. ``imap_security`` is ``tls``
    (port 993) or ``none`` (loopback only: nothing is encrypted); ``smtp_security``
    is ``starttls`` (587), ``tls`` (465) or ``none``. ``username`` defaults to
    ``address``. ``idle`` False polls every ``poll_s`` seconds even where the
    server offers IDLE.

    ``authserv_id`` names the receiving mail server (the first word of the
    ``Authentication-Results`` header it adds on top of each mail). With
    ``require_auth_results`` (the default) an allowed address's mail is taken only
    when that header says DMARC, or DKIM aligned with the From domain, passed;
    False trusts the From address alone (for servers that add no such header).
    """

    address: str | None = None
    username: str | None = None
    password: SecretStr | None = None
    display_name: str = "vikingbot"
    imap_host: str | None = None
    imap_port: int = Field(default=993, ge=1, le=65535)
    imap_security: Literal["tls", "none"] = "tls"
    folder: str = "INBOX"
    smtp_host: str | None = None
    smtp_port: int = Field(default=587, ge=1, le=65535)
    smtp_security: Security = "starttls"
    idle: bool = True
    poll_s: float = Field(default=60.0, gt=0, le=3600)
    subject_prefix: str = "vikingbot"
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    authserv_id: str | None = None
    require_auth_results: bool = True

    @field_validator("address")
    @classmethod
    def _check_address(cls, value: str | None) -> str | None:
        return None if value is None else _address(value, "address")

    @field_validator("owner_chat")
    @classmethod
    def _check_owner(cls, value: str | None) -> str | None:
        return None if value is None else _address(value, "owner_chat")

    @field_validator("allow_from")
    @classmethod
    def _check_allow(cls, value: list[str]) -> list[str]:
        return [v if v == "*" else _address(v, "allow_from entry") for v in value]

    @field_validator("subject_prefix", "display_name")
    @classmethod
    def _check_header_text(cls, value: str) -> str:
        if clean_subject(value) != value.strip():
            raise ValueError("must be one line of printable text (at most 140 characters)")
        return value.strip()

    @field_validator("imap_host", "smtp_host", "folder", "username", "authserv_id")
    @classmethod
    def _check_plain(cls, value: str | None) -> str | None:
        if value is not None and (
            not value or any(c.isspace() or not c.isprintable() for c in value)
        ):
            raise ValueError("must be non-empty, without spaces or control characters")
        return value
