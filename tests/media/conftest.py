"""Real files made on this machine: photos with Pillow, speech with espeak-ng and ffmpeg."""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from vikingbot.testing.fake_anthropic import FakeAnthropic
from vikingbot.testing.fake_openai import FakeOpenAI


def photo(width: int, height: int, fmt: str = "JPEG", mode: str = "RGB") -> bytes:
    """A photo-like picture (gradients, shapes and noise, so it compresses as a photo does)."""
    im = Image.linear_gradient("L").resize((width, height)).convert(mode)
    small = (max(1, width // 3), max(1, height // 3))
    noise = Image.effect_noise(small, 40).resize((width, height)).convert(mode)
    im = Image.blend(im, noise, 0.35)
    draw = ImageDraw.Draw(im)
    for i in range(0, width, max(1, width // 12)):
        draw.ellipse((i, height // 4, i + width // 10, height // 2), outline="white", width=3)
    draw.text((10, 10), "whiteboard: ship media in", fill="black")
    buf = io.BytesIO()
    im.save(buf, fmt, **({"quality": 92} if fmt == "JPEG" else {}))
    return buf.getvalue()


def png_bomb(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` pixels, in a few hundred bytes."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)  # 1-bit grey
    idat = zlib.compress(b"\x00" * 4096, 9)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def speech(folder: Path, words: str, name: str = "voice.ogg") -> Path:
    """``words`` spoken by espeak-ng, as OGG/Opus (a Telegram or Matrix voice note)."""
    if shutil.which("espeak-ng") is None or shutil.which("ffmpeg") is None:
        pytest.skip("needs espeak-ng and ffmpeg (apt-get install espeak-ng ffmpeg)")
    wav = folder / (name + ".wav")
    subprocess.run(["espeak-ng", "-w", str(wav), words], check=True, timeout=60)
    out = folder / name
    subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(wav), "-c:a", "libopus", str(out)],
        check=True,
        timeout=60,
    )
    return out


def silence(folder: Path, seconds: float, name: str) -> Path:
    """``seconds`` of silence as OGG/Opus by ffmpeg (0: a file with no sound at all)."""
    if shutil.which("ffmpeg") is None:
        pytest.skip("needs ffmpeg")
    out = folder / name
    cmd = ["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i"]
    cmd += ["anullsrc=r=16000:cl=mono", "-t", str(seconds), "-c:a", "libopus", str(out)]
    subprocess.run(cmd, check=True, timeout=60)
    return out


@pytest.fixture(scope="session")
def voice_note(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return speech(tmp_path_factory.mktemp("voice"), "please water the plants at six")


def text_pdf(*lines: str) -> bytes:
    """A one-page PDF with ``lines`` as real text (Helvetica), written object by object."""
    body = "BT /F1 14 Tf 72 720 Td 18 TL " + " ".join(f"({s}) '" for s in lines) + " ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        "/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Length {len(body)} >>\nstream\n{body}\nendstream",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for n, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n{obj}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI.start() as fake:
        yield fake


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic.start() as fake:
        yield fake
