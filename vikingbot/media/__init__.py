"""Media in: pictures, voice notes and files people send on any channel (docs/media.md).

A channel hands the files of a message as ``bus.Attachment`` s (its own download code
in ``fetch``); :class:`~vikingbot.media.intake.MediaIntake` takes them in after the
allow list: caps, the original kept in the workspace's ``inbox/`` (``inbox``), images
downscaled for a model that sees (``images``, ``vision``), voice notes transcribed
(``audio``), documents named to the turn. ``sniff`` tells what a file is.
"""

from vikingbot.media.intake import MediaIntake
from vikingbot.media.types import MediaError, Refusal, Taken

__all__ = ["MediaError", "MediaIntake", "Refusal", "Taken"]
