"""A real Dovecot (IMAP + LMTP) on loopback ports, with throwaway mailboxes.

    with Dovecot.started(["bot@example.test", "owner@example.test"]) as mail:
        mail.imap_port, mail.lmtp_port, mail.password
        mail.deliver(raw_bytes, "bot@example.test")      # through LMTP, as a mail server does
        mail.messages("owner@example.test")              # what is in that INBOX (stdlib imaplib)

Everything lives under one temporary folder (removed at the end): the config, the base and state folders, the log and
each user's Maildir. Run as root, the login processes use Debian's ``dovenull`` and the
mail processes the ``dovecot`` user; run as anyone else, everything runs as that user
(Dovecot allows an unprivileged master when every user is the same one). Debian's
package is ``dovecot-imapd`` plus ``dovecot-lmtpd`` (``.ci/run`` installs them).
"""

from __future__ import annotations

import contextlib
import email
import email.policy
import grp
import imaplib
import os
import pwd
import shutil
import smtplib
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from email.message import Message
from pathlib import Path

from tests.support.ports import free_ports

DOVECOT = shutil.which("dovecot") or "/usr/sbin/dovecot"
PASSWORD = "pass-word-1"
START_TIMEOUT_S = 30.0  # a loaded CI machine starts it slowly


def available() -> str | None:
    """None when Dovecot with IMAP and LMTP is installed, else why not."""
    if not Path(DOVECOT).exists():
        return "dovecot is not installed (Debian: dovecot-imapd dovecot-lmtpd)"
    for part in ("imap", "lmtp"):
        if not Path(f"/usr/lib/dovecot/{part}").exists():
            return f"dovecot's {part} service is not installed"
    return None


def _config(root: Path, imap_port: int, lmtp_port: int, idle: bool) -> str:
    if os.geteuid() == 0:
        mail_user, login_user = pwd.getpwnam("dovecot"), "dovenull"
        internal = "dovecot"
    else:
        mail_user = pwd.getpwuid(os.getuid())
        login_user = internal = mail_user.pw_name
    capability = "" if idle else "imap_capability = IMAP4rev1 LITERAL+ SASL-IR UIDPLUS\n"
    return f"""\
protocols = imap lmtp
listen = 127.0.0.1
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_login_user = {login_user}
default_internal_user = {internal}
default_internal_group = {grp.getgrgid(pwd.getpwnam(internal).pw_gid).gr_name}
first_valid_uid = {mail_user.pw_uid}
last_valid_uid = {mail_user.pw_uid}
first_valid_gid = 0
mail_location = maildir:~/Maildir
mail_fsync = never
lmtp_save_to_detail_mailbox = no
{capability}imap_idle_notify_interval = 1 mins
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/users
}}
userdb {{
  driver = static
  args = uid={mail_user.pw_uid} gid={mail_user.pw_gid} home={root}/home/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap_port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service lmtp {{
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {lmtp_port}
  }}
  unix_listener lmtp {{
    mode = 0600
  }}
}}
service anvil {{
  chroot =
}}
service stats {{
  unix_listener stats-reader {{
    mode = 0666
  }}
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
"""


@dataclass
class Dovecot:
    """A running Dovecot; ``stop``/``start`` take it down and up on the same ports."""

    root: Path
    users: Sequence[str]
    imap_port: int
    lmtp_port: int
    idle: bool = True
    password: str = PASSWORD
    _proc: subprocess.Popen[bytes] | None = None

    @classmethod
    @contextlib.contextmanager
    def started(cls, users: Sequence[str], *, idle: bool = True) -> Iterator[Dovecot]:
        # its own folder in the system's temporary folder: run as root, Dovecot's
        # processes run as `dovecot`, which cannot enter pytest's 0700 folders
        root = Path(tempfile.mkdtemp(prefix="vikingbot-dovecot-"))
        rig = cls(root, list(users), *free_ports(2), idle)
        try:
            rig._lay_out()
            rig.start()
            yield rig
        finally:
            rig.stop()
            shutil.rmtree(root, ignore_errors=True)

    def _lay_out(self) -> None:
        for sub in ("run", "state", "home"):
            (self.root / sub).mkdir(exist_ok=True)
        lines = [f"{user}:{{PLAIN}}{self.password}::::::" for user in self.users]
        (self.root / "users").write_text("\n".join(lines) + "\n")
        (self.root / "dovecot.conf").write_text(
            _config(self.root, self.imap_port, self.lmtp_port, self.idle)
        )
        if os.geteuid() == 0:  # the mail processes run as `dovecot`: let them write there
            mail = pwd.getpwnam("dovecot")
            for path in (self.root, self.root / "home"):
                os.chown(path, mail.pw_uid, mail.pw_gid)
            (self.root / "users").chmod(0o644)

    @property
    def conf(self) -> Path:
        return self.root / "dovecot.conf"

    def start(self) -> None:
        self._proc = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(self.conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode() if self._proc.stderr else ""
                raise RuntimeError(f"dovecot exited at start: {err}{self.log()}")
            if _listening(self.imap_port) and _listening(self.lmtp_port):
                return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"dovecot did not listen within {START_TIMEOUT_S}s: {self.log()}"
                )
            time.sleep(0.02)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.wait(5)
        if proc.stderr is not None:
            proc.stderr.close()
        deadline = time.monotonic() + 5  # the children close their sockets after the master
        while _listening(self.imap_port) and time.monotonic() < deadline:
            time.sleep(0.02)

    def log(self) -> str:
        path = self.root / "dovecot.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    # ---- mail in and out ------------------------------------------------------

    def deliver(self, raw: bytes, to: str, sender: str = "someone@example.test") -> None:
        """Put ``raw`` into ``to``'s INBOX through LMTP (as an MTA hands mail to Dovecot)."""
        with smtplib.LMTP("127.0.0.1", self.lmtp_port) as lmtp:
            lmtp.sendmail(sender, [to], raw)

    def imap(self, user: str) -> imaplib.IMAP4:
        conn = imaplib.IMAP4("127.0.0.1", self.imap_port)
        conn.login(user, self.password)
        return conn

    def messages(self, user: str) -> list[Message]:
        """Every message in ``user``'s INBOX, oldest first (read without marking it seen)."""
        conn = self.imap(user)
        try:
            conn.select("INBOX", readonly=True)
            _, data = conn.uid("SEARCH", "ALL")
            out = []
            for uid in data[0].split():
                _, parts = conn.uid("FETCH", uid, "(BODY.PEEK[])")
                for part in parts:
                    if isinstance(part, tuple):
                        out.append(email.message_from_bytes(part[1], policy=email.policy.default))
            return out
        finally:
            conn.logout()

    def unseen_subjects(self, user: str) -> list[str]:
        """The subjects of the messages in ``user``'s INBOX not marked seen."""
        conn = self.imap(user)
        try:
            conn.select("INBOX", readonly=True)
            _, data = conn.search(None, "UNSEEN")
            out = []
            for num in data[0].split():
                _, parts = conn.fetch(num, "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
                for part in parts:
                    if isinstance(part, tuple):
                        head = email.message_from_bytes(part[1], policy=email.policy.default)
                        out.append(str(head["Subject"]))
            return out
        finally:
            conn.logout()


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0
