"""Media in (issue 45): what a picture and a voice note add to a chat turn, what the model
is sent for a 12-megapixel photo, and a gateway's peak memory while 10 people send
20 MB pictures at once.

    uv run --all-extras --dev python bench/media_in.py [--quick]

Each file is downloaded over loopback HTTP (httpx, as a channel's download is), then
taken in by ``vikingbot.media.MediaIntake`` exactly as the gateway's dispatcher does
(caps, the original kept in ``inbox/``, the picture downscaled and re-encoded). The
voice-note figure is download + ffprobe + ffmpeg conversion (the transcription call
itself excluded, as the issue asks). The memory figure is measured in a child process
that imports what a gateway does, then takes in 10 x 20 MB pictures concurrently;
VmHWM (peak RSS) before and after, with ``bot.media.parallel_files`` 2 (the default)
and 10 (unbounded for 10 people) beside each other.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from PIL import Image

from tests.media.conftest import photo
from vikingbot.bus import Attachment
from vikingbot.clock import SystemClock
from vikingbot.config.schema import Config
from vikingbot.media import MediaIntake
from vikingbot.media import audio as media_audio
from vikingbot.media.inbox import keep


def serve(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A loopback static file server (python -m http.server) for ``folder``."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import httpx

    for _ in range(200):
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port}"


def http_attachment(url: str, name: str) -> Attachment:
    async def fetch(limit: int) -> bytes:
        import httpx

        async with httpx.AsyncClient() as client:
            resp = await client.get(url)
            resp.raise_for_status()
            return resp.content

    return Attachment(name, fetch)


def config(**media: object) -> Config:
    return Config.model_validate({"bot": {"agents": {"model": "gpt-4o"}, "media": media or {}}})


async def image_seconds(base: str, ws: Path, runs: int) -> tuple[list[float], int, tuple[int, int]]:
    intake = MediaIntake(config, clock=SystemClock(), environ=os.environ)
    times: list[float] = []
    sent = 0
    size = (0, 0)
    for _ in range(runs):
        t0 = time.perf_counter()
        taken = await intake.take(
            [http_attachment(f"{base}/photo12mp.jpg", "photo.jpg")],
            workspace=ws, chat="bench", sender="b", source="bench",
        )  # fmt: skip
        times.append(time.perf_counter() - t0)
        sent = len(taken.images[0].data)
        with Image.open(io.BytesIO(taken.images[0].data)) as im:
            size = im.size
    return times, sent, size


async def voice_seconds(base: str, ws: Path, runs: int) -> tuple[list[float], list[float]]:
    """download + keep + ffprobe (as is: OGG taken), and + ffmpeg to WAV (converted)."""
    import httpx

    as_is: list[float] = []
    converted: list[float] = []
    for _ in range(runs):
        for out in (as_is, converted):
            t0 = time.perf_counter()
            async with httpx.AsyncClient() as client:
                data = (await client.get(f"{base}/voice30s.ogg")).content
            path = await asyncio.to_thread(keep, ws, "voice.ogg", "ogg", data, SystemClock().now())
            seconds = await media_audio.duration(path)
            assert seconds is not None and seconds > 25, seconds
            if out is converted:
                await media_audio.convert(path, "wav", 600)
            out.append(time.perf_counter() - t0)
    return as_is, converted


CHILD = r"""
import asyncio, sys, time, os
sys.path.insert(0, {root!r})
import vikingbot.gateway.compose, vikingbot.gateway.dispatch  # what a gateway imports
from vikingbot.bus import Attachment
from vikingbot.clock import SystemClock
from vikingbot.config.schema import Config
from vikingbot.media import MediaIntake
import httpx

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith(("VmHWM", "VmRSS")):
            yield line.split()[0][:-1], int(line.split()[1]) // 1024

def att(url, name):
    async def fetch(limit):
        async with httpx.AsyncClient() as c:
            r = await c.get(url)
            return r.content
    return Attachment(name, fetch)

async def main():
    cfg = Config.model_validate({{"bot": {{"agents": {{"model": "gpt-4o"}},
        "media": {{"parallel_files": {parallel}}}}}}})
    intake = MediaIntake(lambda: cfg, clock=SystemClock(), environ={{}})
    async with httpx.AsyncClient() as c:  # warm: the HTTP client's imports
        await c.get({base!r} + "/")
    before = dict(hwm())
    t0 = time.perf_counter()
    takes = [intake.take([att({base!r} + "/big.jpg", f"u{{i}}.jpg")], workspace=__import__("pathlib").Path({ws!r}) / str(i),
             chat=str(i), sender=str(i), source="bench") for i in range(10)]
    done = await asyncio.gather(*takes)
    assert all(len(t.images) == 1 for t in done), [t.notices for t in done]
    after = dict(hwm())
    print(before["VmHWM"], after["VmHWM"], round(time.perf_counter() - t0, 2))

asyncio.run(main())
"""


def peak_memory(base: str, ws: Path, parallel: int) -> tuple[int, int, float]:
    code = CHILD.format(root=str(Path(__file__).resolve().parent.parent), parallel=parallel,
                        base=base, ws=str(ws))  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    before, after, secs = out.stdout.split()
    return int(before), int(after), float(secs)


def speech30(folder: Path) -> Path:
    words = " ".join(["please water the plants at six and call the plumber about the sink"] * 6)
    wav, ogg = folder / "v.wav", folder / "voice30s.ogg"
    subprocess.run(["espeak-ng", "-s", "150", "-w", str(wav), words], check=True)
    cmd = ["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(wav), "-t", "30"]
    subprocess.run([*cmd, "-c:a", "libopus", str(ogg)], check=True)
    return ogg


def big_jpeg(path: Path, target: int = 20_000_000) -> int:
    """A photo-like JPEG of about ``target`` bytes (noise at high quality)."""
    w, h = 6000, 4500
    for _ in range(4):
        Image.effect_noise((w, h), 90).convert("RGB").save(path, "JPEG", quality=95)
        size = path.stat().st_size
        if abs(size - target) < target * 0.05:
            break
        scale = (target / size) ** 0.5
        w, h = int(w * scale), int(h * scale)
    with Image.open(path) as im:
        BIG_SIZE[:] = im.size
    return size


BIG_SIZE = [0, 0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer runs")
    args = ap.parse_args()
    runs = 3 if args.quick else 7
    if shutil.which("ffmpeg") is None or shutil.which("espeak-ng") is None:
        raise SystemExit("needs ffmpeg and espeak-ng (apt-get install -y ffmpeg espeak-ng)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = root / "files"
        files.mkdir()
        (files / "photo12mp.jpg").write_bytes(photo(4000, 3000))
        speech30(files)
        big = big_jpeg(files / "big.jpg")
        server, base = serve(files)
        try:
            t_img, sent, size = asyncio.run(image_seconds(base, root / "ws", runs))
            t_ogg, t_wav = asyncio.run(voice_seconds(base, root / "ws", runs))
            mem = {p: peak_memory(base, root / f"mem{p}", p) for p in (2, 10)}
        finally:
            server.terminate()
            server.wait()
    cap = config().bot.media
    print(f"media in, {runs} runs each (median, max):")
    print(f"  image 4000x3000 JPEG: {statistics.median(t_img):.3f} s  (max {max(t_img):.3f})"
          "  download + keep + downscale + encode; target < 1 s")  # fmt: skip
    print(
        f"  voice note 30 s OGG/Opus, taken as is: {statistics.median(t_ogg):.3f} s  "
        f"(max {max(t_ogg):.3f})  download + keep + ffprobe; target < 1 s"
    )
    print(
        f"  voice note 30 s OGG/Opus -> WAV: {statistics.median(t_wav):.3f} s  "
        f"(max {max(t_wav):.3f})  + ffmpeg conversion; target < 1 s"
    )
    print(
        f"  bytes to the model for a 12 MP photo: {sent:,} JPEG ({size[0]}x{size[1]}), "
        f"{(sent + 2) // 3 * 4:,} as base64; cap {cap.image_max_bytes:,} bytes, "
        f"{cap.image_max_pixels:,} pixels, {cap.image_max_side} px side"
    )
    for p, (before, after, secs) in mem.items():
        mp = BIG_SIZE[0] * BIG_SIZE[1] / 1e6
        print(
            f"  10 people x {big / 1e6:.1f} MB JPEG ({mp:.0f} MP) at once, parallel_files={p}: "
            f"peak RSS {before} MiB before -> {after} MiB ({after - before:+d} MiB), {secs} s"
        )


if __name__ == "__main__":
    main()
