"""The email channel: IMAP in (IDLE or polling), SMTP out (see docs/channels.md).

``settings`` (the section's model and its checks), ``address`` (addresses and
subjects, pure), ``body`` (a received mail's new text, pure and total),
``thread`` (a Message-ID as a target's thread id), ``compose`` (an outgoing
mail), ``inbox`` (the IMAP side), ``channel`` (the ``Channel`` the registry loads).
"""
