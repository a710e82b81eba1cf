"""Seeded mutations of bytes for the fuzz harness (:mod:`tests.fuzzing`): bit flips, bytes
set to boundary values, length and count fields out of range, truncations, deleted and
duplicated ranges; framed inputs (binlog events, protocol packets) mutated frame-wise.

Each mutation returns the new bytes and a short description naming what it did and where
(the byte offset), so a finding can be read and replayed."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

Frames = Sequence[tuple[int, int]]
"""``(offset, size)`` of each frame (event, packet) of an input, in order."""

Mutation = Callable[[random.Random, bytes, Frames], tuple[bytes, str]]

BOUNDARY_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF)
# Little-endian values that lengths and counts go wrong with, and their widths.
BOUNDARY_INTS = (0, 1, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF)
# Length-encoded integers (the protocol's and the binlog's packed counts) that are large.
PACKED_INTS = (b"\xfb", b"\xfc\xff\xff", b"\xfd\xff\xff\xff", b"\xfe" + b"\xff" * 8,
               b"\xfe\x00\x00\x00\x80\x00\x00\x00\x00", b"\xff")


def _frame(rng: random.Random, frames: Frames) -> tuple[int, int]:
    return frames[rng.randrange(len(frames))]


def _place(rng: random.Random, data: bytes, frames: Frames, head: int) -> int:
    """A byte offset: half the time within the first bytes after a frame's header (where
    post-headers keep lengths and counts), else anywhere."""
    if frames and rng.random() < 0.5:
        offset, size = _frame(rng, frames)
        at = offset + head + rng.randrange(max(1, min(size - head, 48)))
        if at < len(data):  # frames found before an earlier mutation may be past the end
            return at
    return rng.randrange(len(data))


def flip_bits(rng: random.Random, data: bytes, frames: Frames, head: int = 0
              ) -> tuple[bytes, str]:
    out = bytearray(data)
    places = []
    for _ in range(rng.choice((1, 1, 2, 4, 8))):
        at = _place(rng, data, frames, head)
        bit = rng.randrange(8)
        out[at] ^= 1 << bit
        places.append(f"{at}.{bit}")
    return bytes(out), f"bit flips at {', '.join(places)}"


def boundary_byte(rng: random.Random, data: bytes, frames: Frames, head: int = 0
                  ) -> tuple[bytes, str]:
    at = _place(rng, data, frames, head)
    value = rng.choice(BOUNDARY_BYTES)
    return data[:at] + bytes([value]) + data[at + 1:], f"byte {at} set to 0x{value:02x}"


def boundary_int(rng: random.Random, data: bytes, frames: Frames, head: int = 0
                 ) -> tuple[bytes, str]:
    """A 1, 2, 4 or 8-byte little-endian field overwritten with a boundary value, or a
    length-encoded integer written over the bytes there."""
    at = _place(rng, data, frames, head)
    if rng.random() < 0.3:
        field = rng.choice(PACKED_INTS)
        what = f"packed int {field.hex()}"
    else:
        width = rng.choice((1, 2, 4, 8))
        value = rng.choice(BOUNDARY_INTS) & ((1 << (8 * width)) - 1)
        field = value.to_bytes(width, "little")
        what = f"u{8 * width} 0x{value:x}"
    return data[:at] + field + data[at + len(field):], f"{what} written at {at}"


def truncate(rng: random.Random, data: bytes, frames: Frames, head: int = 0
             ) -> tuple[bytes, str]:
    if frames and rng.random() < 0.5:
        offset, size = _frame(rng, frames)
        at = max(0, min(len(data), offset + rng.choice((0, 1, 3, head - 1, head, head + 1,
                                                        size - 1, size - 4))))
    else:
        at = rng.randrange(len(data))
    return data[:at], f"cut at {at} of {len(data)}"


def delete_range(rng: random.Random, data: bytes, frames: Frames, head: int = 0
                 ) -> tuple[bytes, str]:
    if frames and rng.random() < 0.5:
        at, size = _frame(rng, frames)
        return data[:at] + data[at + size:], f"frame at {at} ({size} bytes) deleted"
    at = rng.randrange(len(data))
    size = rng.choice((1, 2, 4, 8, 19, 100))
    return data[:at] + data[at + size:], f"{size} bytes deleted at {at}"


def duplicate_range(rng: random.Random, data: bytes, frames: Frames, head: int = 0
                    ) -> tuple[bytes, str]:
    if frames and rng.random() < 0.5:
        at, size = _frame(rng, frames)
        return data[:at + size] + data[at:at + size] + data[at + size:], \
            f"frame at {at} ({size} bytes) duplicated"
    at = rng.randrange(len(data))
    size = rng.choice((1, 4, 19, 64))
    return data[:at] + data[at:at + size] + data[at:], f"{size} bytes at {at} duplicated"


def swap_frames(rng: random.Random, data: bytes, frames: Frames, head: int = 0
                ) -> tuple[bytes, str]:
    if len(frames) < 2:
        return flip_bits(rng, data, frames, head)
    i = rng.randrange(len(frames) - 1)
    (a, size_a), (b, size_b) = frames[i], frames[i + 1]
    return (data[:a] + data[b:b + size_b] + data[a:a + size_a] + data[b + size_b:],
            f"frames at {a} and {b} swapped")


def size_field(rng: random.Random, data: bytes, frames: Frames, field_at: int,
               width: int, size_of: Callable[[int], int]) -> tuple[bytes, str]:
    """A frame's own length field (``width`` bytes at ``field_at`` in the frame) set out of
    range: 0, below and above the frame's size, the field's maximum."""
    if not frames:
        return flip_bits(rng, data, frames)
    offset, size = _frame(rng, frames)
    actual = size_of(size)
    top = (1 << (8 * width)) - 1
    value = rng.choice((0, 1, actual - 1, actual + 1, actual * 2, top, top - 1, 18, 19, 20,
                        len(data))) & top
    at = offset + field_at
    if at + width > len(data):
        return flip_bits(rng, data, frames)
    field = max(0, value).to_bytes(width, "little")
    return data[:at] + field + data[at + width:], \
        f"length field of the frame at {offset} set to {max(0, value)} (was {actual})"


GENERIC: tuple[Mutation, ...] = (flip_bits, flip_bits, boundary_byte, boundary_int,
                                 boundary_int, truncate, delete_range, duplicate_range,
                                 swap_frames)


def mutate(rng: random.Random, data: bytes, frames: Frames, extra: Sequence[Mutation] = (),
           head: int = 0, rounds: int = 0) -> tuple[bytes, list[str]]:
    """``data`` after one to three mutations (``rounds`` when given) drawn from the generic
    ones and ``extra`` (frame-aware ones of the input's kind); what each did. ``head``: the
    frames' header size, after which lengths and counts are looked for."""
    pool = (*GENERIC, *extra, *extra)
    done: list[str] = []
    for _ in range(rounds or rng.choice((1, 1, 1, 2, 3))):
        if not data:
            break
        data, what = rng.choice(pool)(rng, data, frames, head)
        done.append(what)
    return data, done
