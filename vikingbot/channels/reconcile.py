"""What a changed config does to the running channels: a pure decision (issue 42).

:func:`plan` compares the channel sections of the config a gateway runs with the
one it just read and says, per channel, whether to start, stop or restart it. The
channel manager carries the plan out (``ChannelManager.apply``); nothing here does
I/O. A channel's section is compared whole (tokens, targets, allow-lists, every
field) together with the owner's chat on it, which ``bot.owner`` may name.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from vikingbot.config.schema import Config
from vikingbot.delivery.owner import channel_sections, owner_chat_for

Action = Literal["start", "stop", "restart"]


class Step(NamedTuple):
    """One channel's part of a config change."""

    channel: str
    action: Action


def plan(old: Config, new: Config, running: frozenset[str] = frozenset()) -> list[Step]:
    """The steps that take the channels from ``old`` to ``new``, in ``new``'s order.

    ``running`` names the channels that are up now: an enabled channel that is not
    (it failed to start) is started again when its section changed, so fixing a
    token in the config is enough.
    """
    before, after = channel_sections(old), channel_sections(new)
    steps: list[Step] = []
    for name in dict.fromkeys([*after, *before]):
        was, now = before.get(name), after.get(name)
        was_on = was is not None and was.enabled
        now_on = now is not None and now.enabled
        if was_on and not now_on:
            steps.append(Step(name, "stop"))
        elif now_on and not was_on:
            steps.append(Step(name, "start"))
        elif now_on and (was != now or owner_chat_for(old, name) != owner_chat_for(new, name)):
            steps.append(Step(name, "restart" if name in running else "start"))
    return steps
