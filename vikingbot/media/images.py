"""Pictures for the model: refuse a bomb unopened, decode, downscale, re-encode (Pillow)."""

from __future__ import annotations

import io
import math
import warnings

from PIL import Image, ImageOps, UnidentifiedImageError

from vikingbot.media.types import MediaError
from vikingbot.providers.base import ImagePart

# Pillow's own bomb guard warns past MAX_IMAGE_PIXELS and raises past twice that; the
# pixel count is checked against bot.media.image_bomb_pixels first, before decoding.
_BROKEN = (
    OSError,
    SyntaxError,
    ValueError,
    EOFError,
    Image.DecompressionBombError,
    Image.DecompressionBombWarning,
)


def prepare(
    data: bytes,
    *,
    name: str = "image",
    max_pixels: int = 1_150_000,
    max_side: int = 1568,
    max_bytes: int = 800_000,
    bomb_pixels: int = 40_000_000,
) -> ImagePart:
    """``data`` as a JPEG of at most ``max_pixels`` pixels, ``max_side`` on the long side
    and ``max_bytes`` bytes (transparency flattened onto white, EXIF rotation applied).

    Raises :class:`MediaError` for a file that is no image, is truncated or corrupt
    (``corrupt``), or has more than ``bomb_pixels`` pixels (``bomb``).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            im = Image.open(io.BytesIO(data))
        except UnidentifiedImageError as exc:
            raise MediaError("corrupt", f"{name} is not an image I can open") from exc
        except _BROKEN as exc:
            raise _broken(name, exc) from exc
        with im:
            w, h = im.size
            if w <= 0 or h <= 0:
                raise MediaError("corrupt", f"{name} has no pixels")
            if w * h > bomb_pixels:
                raise MediaError(
                    "bomb",
                    f"{name} is {w}x{h} pixels ({w * h / 1e6:.0f} megapixels), over the "
                    f"{bomb_pixels / 1e6:.0f} megapixel limit: I did not open it",
                )
            try:
                out = _fit(im, max_pixels, max_side)
                return ImagePart("image/jpeg", _encode(out, max_bytes))
            except _BROKEN as exc:
                raise _broken(name, exc) from exc


def _broken(name: str, exc: BaseException) -> MediaError:
    if isinstance(exc, Image.DecompressionBombError | Image.DecompressionBombWarning):
        return MediaError(
            "bomb", f"{name} has too many pixels (an image bomb, {exc}): I did not open it"
        )
    why = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
    return MediaError("corrupt", f"{name} is damaged or cut short ({why})")


def target_size(w: int, h: int, max_pixels: int, max_side: int) -> tuple[int, int]:
    """The size ``w``x``h`` is scaled down to (kept when already within both caps)."""
    scale = min(1.0, max_side / max(w, h), math.sqrt(max_pixels / (w * h)))
    return max(1, math.floor(w * scale)), max(1, math.floor(h * scale))


def _fit(im: Image.Image, max_pixels: int, max_side: int) -> Image.Image:
    w, h = im.size
    tw, th = target_size(w, h, max_pixels, max_side)
    if im.format == "JPEG":
        im.draft("RGB", (tw, th))  # decode at 1/2, 1/4 or 1/8 scale: fast, little memory
    im.seek(0)  # an animation: its first frame
    im.load()
    im = ImageOps.exif_transpose(im)
    if im.mode in ("RGBA", "LA", "P", "PA"):
        rgba = im.convert("RGBA")
        flat = Image.new("RGB", rgba.size, (255, 255, 255))
        flat.paste(rgba, mask=rgba.getchannel("A"))
        im = flat
    elif im.mode != "RGB":
        im = im.convert("RGB")
    tw, th = target_size(*im.size, max_pixels, max_side)
    if (tw, th) != im.size:
        im = im.resize((tw, th), Image.Resampling.LANCZOS, reducing_gap=3.0)
    return im


def _encode(im: Image.Image, max_bytes: int) -> bytes:
    """JPEG at quality 85, lowered (then the size) until it fits ``max_bytes``."""
    for _ in range(8):
        for quality in (85, 70, 55, 40):
            buf = io.BytesIO()
            im.save(buf, "JPEG", quality=quality, optimize=True)
            if buf.tell() <= max_bytes:
                return buf.getvalue()
        im = im.resize((max(1, im.width * 3 // 4), max(1, im.height * 3 // 4)))
    return buf.getvalue()
