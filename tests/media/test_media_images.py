"""Pictures for the model: downscaled within the caps, bombs and broken files refused."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from tests.media.conftest import photo, png_bomb
from vikingbot.media.images import prepare, target_size
from vikingbot.media.types import MediaError

PHOTO_12MP = photo(4000, 3000)


def _size(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as im:
        return im.size


def test_a_12_megapixel_photo_goes_to_the_model_within_the_pixel_and_byte_caps() -> None:
    part = prepare(PHOTO_12MP, max_pixels=1_150_000, max_side=1568, max_bytes=800_000)
    w, h = _size(part.data)
    assert part.mime == "image/jpeg"
    assert w * h <= 1_150_000 and max(w, h) <= 1568
    assert abs(w / h - 4 / 3) < 0.01  # the shape is kept
    assert len(part.data) <= 800_000 < len(PHOTO_12MP)


def test_a_tight_byte_cap_is_met_by_lower_quality_then_fewer_pixels() -> None:
    part = prepare(photo(1600, 1200), max_bytes=30_000)
    assert len(part.data) <= 30_000
    assert _size(part.data)[0] >= 100


def test_a_transparent_screenshot_is_flattened_onto_white() -> None:
    im = Image.new("RGBA", (300, 200), (0, 0, 0, 0))
    buf = io.BytesIO()
    im.save(buf, "PNG")
    part = prepare(buf.getvalue())
    with Image.open(io.BytesIO(part.data)) as out:
        assert out.size == (300, 200)  # small: not scaled
        assert out.convert("RGB").getpixel((150, 100))[0] > 240  # type: ignore[index]


def test_an_image_bomb_is_refused_without_decoding() -> None:
    bomb = png_bomb(100_000, 100_000)  # 10 gigapixels in a few hundred bytes
    assert len(bomb) < 1000
    with pytest.raises(MediaError) as err:
        prepare(bomb, name="bomb.png", bomb_pixels=40_000_000)
    assert err.value.reason == "bomb"
    assert "did not open it" in str(err.value)


def test_a_bomb_under_pillows_own_limit_is_refused_at_ours() -> None:
    # 64 megapixels: under Pillow's own limit, over ours
    with pytest.raises(MediaError) as err:
        prepare(png_bomb(8000, 8000), name="big.png", bomb_pixels=40_000_000)
    assert err.value.reason == "bomb"
    assert "big.png is 8000x8000 pixels" in str(err.value)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (PHOTO_12MP[: len(PHOTO_12MP) // 3], "corrupt"),  # cut short mid-download
        (b"\xff\xd8\xff\xe0" + b"\x00" * 200, "corrupt"),  # a JPEG header and nothing
        (b"this is not a picture", "corrupt"),
        (b"", "corrupt"),
    ],
)
def test_a_broken_image_is_one_clear_refusal(data: bytes, reason: str) -> None:
    with pytest.raises(MediaError) as err:
        prepare(data, name="photo.jpg")
    assert err.value.reason == reason
    assert str(err.value).startswith("photo.jpg ")


def test_target_size_keeps_small_images_and_caps_both_ways() -> None:
    assert target_size(800, 600, 1_150_000, 1568) == (800, 600)
    assert target_size(10_000, 100, 1_150_000, 1568) == (1568, 15)
    w, h = target_size(4000, 3000, 1_150_000, 1568)
    assert w * h <= 1_150_000


_SMALL_PNG = photo(64, 48, "PNG")
_SMALL_JPEG = photo(64, 48)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from([_SMALL_PNG, _SMALL_JPEG]),
    cut=st.integers(min_value=0, max_value=4000),
    flips=st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 255)), max_size=6),
)
def test_any_damaged_image_is_refused_or_taken_never_a_crash(
    base: bytes, cut: int, flips: list[tuple[int, int]]
) -> None:
    data = bytearray(base[: max(0, len(base) - cut)])
    for at, value in flips:
        if data:
            data[at % len(data)] = value
    try:
        part = prepare(bytes(data), max_bytes=50_000)
    except MediaError as exc:
        assert exc.reason in ("corrupt", "bomb")
    else:
        assert part.data[:3] == b"\xff\xd8\xff"
