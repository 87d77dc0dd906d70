"""The email channel's pure parts: a received mail's new text, addresses, subjects, threads."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vikingbot.channels.mail.address import check_address, clean_subject, subject_for
from vikingbot.channels.mail.body import read_mail
from vikingbot.channels.mail.compose import compose, message_id_for
from vikingbot.channels.mail.thread import message_id_of, thread_of
from vikingbot.errors import ChannelRejected

HEAD = b"From: Ann <ann@example.org>\r\nSubject: Hi\r\nMessage-ID: <x1@example.org>\r\n"


def plain(body: str) -> bytes:
    return HEAD + b"Content-Type: text/plain; charset=utf-8\r\n\r\n" + body.encode()


@pytest.mark.parametrize(
    ("body", "new"),
    [
        (
            "Yes, noon.\n\nOn Mon, 1 Jan 2026 at 10:00, Bot <b@x.org> wrote:\n> lunch?\n",
            "Yes, noon.",
        ),
        ("Yes.\nOn Mon, 1 Jan 2026 at 10:00, a very long name\n<b@x.org> wrote:\n> q\n", "Yes."),
        ("Ja.\n\nAm 1. Jan. 2026 schrieb Bot <b@x.org>:\n> q\n", "Ja."),
        ("Sure\n\n-----Original Message-----\nFrom: Bot\nq\n", "Sure"),
        ("Fine\n\nFrom: Bot <b@x.org>\nSent: Monday\nSubject: q\n", "Fine"),
        ("ok\n________________________________\nFrom: Bot\n", "ok"),
        ("> q1\nanswer one\n> q2\nanswer two\n", "answer one\nanswer two"),
        ("thanks\n-- \nAnn, sent from a phone\n", "thanks"),
        ("On the way home\nI thought of it\n", "On the way home\nI thought of it"),
    ],
)
def test_the_new_text_leaves_quotes_and_signatures_out(body: str, new: str) -> None:
    mail = read_mail(plain(body))
    assert (mail.text, mail.problem) == (new, None)
    assert (mail.sender, mail.message_id, mail.subject) == (
        "ann@example.org",
        "<x1@example.org>",
        "Hi",
    )


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"Subject: x\r\n\r\nbody", "no From address"),
        (b"From: a@x.org, b@x.org\r\n\r\nbody", "names 2 addresses"),
        (b"From: not an address\r\n\r\nbody", "not a plain address"),
        (HEAD + b"Content-Type: image/png\r\n\r\n\x89PNG", "no text part"),
        (plain("> only\n> quoted\n"), "no new text"),
        (b"", "no From address"),
    ],
)
def test_a_mail_without_usable_text_says_why(raw: bytes, problem: str) -> None:
    mail = read_mail(raw)
    assert mail.problem is not None and problem in mail.problem
    assert mail.text == ""


def test_bounces_and_auto_replies_are_automatic() -> None:
    assert read_mail(HEAD + b"Auto-Submitted: auto-replied\r\n\r\nAway").automatic
    assert read_mail(HEAD + b"Precedence: bulk\r\n\r\nNews").automatic
    assert read_mail(b"From: MAILER-DAEMON@x.org\r\n\r\nbounce").automatic
    assert not read_mail(HEAD + b"Auto-Submitted: no\r\n\r\nhi").automatic


def test_html_quotes_are_left_out() -> None:
    raw = HEAD + (
        b"Content-Type: text/html\r\n\r\n<div>New <b>words</b></div>"
        b'<div class="gmail_quote">On Mon wrote:<blockquote>old</blockquote></div>'
    )
    assert read_mail(raw).text == "New words"


def test_references_keep_the_chain_in_order() -> None:
    raw = HEAD + b"References: <a@x> <b@x>\r\nIn-Reply-To: <b@x>\r\n\r\nhi"
    assert read_mail(raw).references == ("<a@x>", "<b@x>")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000))
def test_any_bytes_give_a_mail_and_no_exception(raw: bytes) -> None:
    mail = read_mail(raw)
    assert (mail.text == "") == (mail.problem is not None)


_mime_bits = st.sampled_from(
    [
        b"From: a@x.org\r\n",
        b"Content-Type: multipart/mixed; boundary=b\r\n",
        b"Content-Type: text/plain; charset=x-unknown\r\n",
        b"Content-Transfer-Encoding: base64\r\n",
        b"Content-Transfer-Encoding: quoted-printable\r\n",
        b"Subject: =?utf-8?b?!!!?=\r\n",
        b"Subject: =?bogus?q?x=0D=0A?=\r\n",
        b"\r\n",
        b"--b\r\n",
        b"--b--\r\n",
        b"> quoted\r\n",
        b"On Mon wrote:\r\n",
        b"<blockquote><div class=gmail_quote>",
        b"text \xff\xfe\r\n",
        b"=E9=\r\n",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_mime_bits, max_size=40))
def test_mime_shaped_garbage_gives_a_mail_and_no_exception(bits: list[bytes]) -> None:
    read_mail(b"".join(bits), complete=False)


def test_the_parser_is_linear_in_the_input() -> None:
    def took(n: int) -> float:
        raw = plain("> q\nOn x\n" * n + "<" * n)
        best = float("inf")
        for _ in range(5):  # the fastest of five: a busy machine's pauses are not the parser's
            start = time.perf_counter()
            read_mail(raw)
            best = min(best, time.perf_counter() - start)
        return best

    small, large = took(2_000), took(20_000)
    assert large < small * 30  # ten times the input; quadratic would be ~100x


@pytest.mark.parametrize(
    "bad",
    [
        "owner@example.org\r\nBcc: x@y.org",
        "a@b.org, c@d.org",
        "Ann <a@b.org>",
        "no-at-sign",
        "a@localhost",
        "a@b.org\n",
        "",
    ],
)
def test_only_a_plain_address_passes(bad: str) -> None:
    with pytest.raises(ChannelRejected):
        check_address(bad)


def test_an_address_keeps_its_local_part_and_lowers_its_domain() -> None:
    assert check_address(" Ann.Lee+bot@Example.ORG ") == "Ann.Lee+bot@example.org"


def test_subjects_are_one_line() -> None:
    assert clean_subject("a\r\nBcc: x@y.org\t b") == "a Bcc: x@y.org b"
    assert len(clean_subject("x" * 1000)) == 140
    assert subject_for("## Build is red\n\nbody", "vikingbot") == "vikingbot: Build is red"
    assert subject_for("", "") == "(no subject)"


@given(st.text(max_size=300))
def test_a_thread_id_stands_for_its_message_id(inner: str) -> None:
    thread = thread_of(f"<{inner}>")
    clean = inner.strip()
    if not clean:
        assert thread is None
        return
    assert thread is not None and len(thread) <= 128
    back = message_id_of(thread)
    if back is not None:
        assert back == f"<{clean}>"


def test_common_message_ids_round_trip() -> None:
    ident = "<CAF=k+x_y/z$1@mail.gmail.com>"
    thread = thread_of(ident)
    assert thread == "CAF_3Dk+x_5Fy_2Fz_241@mail.gmail.com"
    assert message_id_of(thread) == ident


def test_a_resend_has_the_same_message_id() -> None:
    when = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)

    def make() -> str:
        return str(
            compose(sender="bot@x.org", to="me@x.org", subject="s", text="t", key="k1", when=when)[
                "Message-ID"
            ]
        )

    assert make() == make() == message_id_for("k1", "bot@x.org")
    assert message_id_for("k2", "bot@x.org") != make()
