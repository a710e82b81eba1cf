"""Fuzz targets of the binlog readers (:mod:`tests.fuzzing`): mutated corpus binlogs read as
``--source file://`` reads them, and mutated COM_BINLOG_DUMP reply streams (a capture of a
private MariaDB's, and the corpus files' events framed as a server sends them) read by the
live source's packet reader through a socket; both on to records
(:mod:`tests.fuzz_pipeline`)."""

from __future__ import annotations

import contextlib
import gzip
import random
import socket
import struct
import threading
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from changestream.decoding.event_decoder import CHECKSUM_CRC32, CHECKSUM_OFF, EventDecoder
from changestream.sources.files import FileSource
from changestream.sources.live import LiveSource
from tests.corpus.reference import CORPUS, corpus_files
from tests.fuzz_mutators import Frames, mutate, size_field
from tests.fuzz_pipeline import route
from tests.fuzzing import Case

HEADER_SIZE = 19
# sakila is 47,000 rows: its first events are enough, and keep a case quick.
HEAD_BYTES = 96 << 10
CAPTURES = Path(__file__).resolve().parent / "fuzz_data"
EOF_PACKET = b"\x05\x00\x00\x00\xfe\x00\x00\x02\x00"


@dataclass(slots=True, frozen=True)
class Base:
    """An input to mutate: its bytes, its frames (events or packets) and how it is read."""

    name: str
    data: bytes
    frames: Frames
    checksum_alg: int = CHECKSUM_OFF
    file: str = "mysql-bin.000001"


def event_frames(data: bytes, start: int = 4) -> list[tuple[int, int]]:
    """``(offset, size)`` of the whole events of a binlog's bytes, from ``start``."""
    frames = []
    offset = start
    while offset + HEADER_SIZE <= len(data):
        size = struct.unpack_from("<I", data, offset + 9)[0]
        if size < HEADER_SIZE or offset + size > len(data):
            break
        frames.append((offset, size))
        offset += size
    return frames


def corpus_binlogs() -> list[Base]:
    """Every corpus binlog (gzip'd ones unpacked; the long ones cut after an event)."""
    bases = []
    for relative in corpus_files():
        data = (CORPUS / relative).read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        frames = event_frames(data)
        if len(data) > HEAD_BYTES:
            frames = [(o, s) for o, s in frames if o + s <= HEAD_BYTES]
            data = data[:frames[-1][0] + frames[-1][1]] if frames else data[:HEAD_BYTES]
        name = Path(relative).name.removesuffix(".gz")
        bases.append(Base(relative, data, frames, _checksum_alg(data, frames), name))
    return bases


def _checksum_alg(data: bytes, frames: Frames) -> int:
    """The checksum algorithm the binlog's FORMAT_DESCRIPTION names."""
    if not frames:
        return CHECKSUM_OFF
    decoder = EventDecoder(verify_checksums=False)
    offset, size = frames[0]
    try:
        decoder.decode(data[offset:offset + size], None, offset)
    except Exception:
        return CHECKSUM_OFF
    return decoder.checksum_alg if decoder.checksum_alg is not None else CHECKSUM_OFF


def _read_file(path: Path, verify: bool, workers: bool, spill: str) -> int:
    decoder = EventDecoder(verify_checksums=verify)
    source = FileSource([path], decoder=decoder)
    return route(source.raw_events(), decoder, spill, workers=workers)


class BinlogTarget:
    """Mutated corpus binlogs, read as a file source; a quarter of them with checksums
    verified (most damage then stops there), one in ten gzip'd (half of those with the
    gzip stream itself damaged)."""

    def __init__(self) -> None:
        self.bases = corpus_binlogs()
        self.extra = (partial(_event_size, field_at=9),)

    def case(self, rng: random.Random) -> Case:
        base = rng.choice(self.bases)
        data, done = mutate(rng, base.data, base.frames, self.extra, head=HEADER_SIZE)
        options = {"verify": rng.random() < 0.25, "workers": rng.random() < 0.7,
                   "name": base.file, "gzip": False}
        if rng.random() < 0.1:
            options["gzip"] = True
            data = gzip.compress(data, mtime=0)
            if rng.random() < 0.5:
                data, more = mutate(rng, data, [], rounds=1)
                done += [f"gzip'd, then {m}" for m in more]
            else:
                done.append("gzip'd")
        return Case(data, base.name, "; ".join(done), options)

    def run(self, case: Case, scratch: Path) -> int:
        path = scratch / str(case.options["name"])
        path.write_bytes(case.data)
        spill = scratch / "spill"
        spill.mkdir(exist_ok=True)
        return _read_file(path, bool(case.options["verify"]), bool(case.options["workers"]),
                          str(spill))


def _event_size(rng: random.Random, data: bytes, frames: Frames, head: int,
                field_at: int) -> tuple[bytes, str]:
    """An event's size field (in its header) set out of range."""
    return size_field(rng, data, frames, field_at, 4, lambda size: size - field_at + 9)


# -- the live source's packet reader -------------------------------------------------------


def dump_stream(base: Base) -> Base:
    """A binlog's events as a server sends them after COM_BINLOG_DUMP: a packet each (an OK
    byte, then the event), then the EOF packet of a non-blocking dump."""
    out = bytearray()
    frames = []
    for seq, (offset, size) in enumerate(base.frames, start=1):
        frames.append((len(out), size + 5))
        out += (size + 1).to_bytes(3, "little") + bytes([seq & 0xFF]) + b"\x00"
        out += base.data[offset:offset + size]
    return Base(f"{base.name} (as dump packets)", bytes(out + EOF_PACKET), frames,
                base.checksum_alg, base.file)


def captures() -> list[Base]:
    """Recorded dump streams of private servers (``fuzz_data/*.dump``: the bytes a server
    sent after COM_BINLOG_DUMP; ``crc32`` in the name when its events carry checksums)."""
    bases = []
    for path in sorted(CAPTURES.glob("*.dump")):
        data = path.read_bytes()
        bases.append(Base(f"capture {path.name}", data, packet_frames(data),
                          CHECKSUM_CRC32 if "crc32" in path.name else CHECKSUM_OFF))
    return bases


def packet_frames(data: bytes) -> list[tuple[int, int]]:
    """``(offset, size)`` of the whole packets (header included) in ``data``."""
    frames = []
    offset = 0
    while offset + 4 <= len(data):
        length = int.from_bytes(data[offset:offset + 3], "little")
        if offset + 4 + length > len(data):
            break
        frames.append((offset, length + 4))
        offset += length + 4
    return frames


class _Connection:
    """What the packet reader takes of a PyMySQL connection: its socket."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock


def read_packets(data: bytes, base_file: str, checksum_alg: int, verify: bool,
                 workers: bool, spill: str) -> int:
    """``data`` served through a socket to the live source's packet reader, and its
    events on to records."""
    reader, writer = socket.socketpair()

    def serve() -> None:
        with contextlib.suppress(OSError):
            writer.sendall(data)
        writer.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        decoder = EventDecoder(verify_checksums=verify, checksum_alg=checksum_alg)
        source = LiveSource({}, blocking=False, verify_checksums=verify, decoder=decoder)
        source.file, source.pos = base_file, 4
        batches = source._read_batches(_Connection(reader), idle=False)  # type: ignore[arg-type]
        return route((raw for batch in batches if batch for raw in batch), decoder, spill,
                     workers=workers)
    finally:
        reader.close()
        thread.join()


class PacketTarget:
    """Mutated dump streams (captures, and the corpus binlogs as dump packets) read by the
    live source's packet reader; a quarter with checksums verified."""

    def __init__(self) -> None:
        self.bases = captures() + [dump_stream(b) for b in corpus_binlogs() if b.frames]
        self.extra = (_packet_length, _packet_status, partial(_event_size, field_at=14))

    def case(self, rng: random.Random) -> Case:
        # The captures are what a server really sends: a third of the cases.
        captured = [b for b in self.bases if b.name.startswith("capture")]
        base = rng.choice(captured) if captured and rng.random() < 0.33 else \
            rng.choice(self.bases)
        data, done = mutate(rng, base.data, base.frames, self.extra, head=24)
        options = {"verify": rng.random() < 0.25, "workers": rng.random() < 0.5,
                   "file": base.file, "checksum_alg": base.checksum_alg}
        return Case(data, base.name, "; ".join(done), options)

    def run(self, case: Case, scratch: Path) -> int:
        spill = scratch / "spill"
        spill.mkdir(exist_ok=True)
        return read_packets(case.data, str(case.options["file"]),
                            int(case.options["checksum_alg"]), bool(case.options["verify"]),
                            bool(case.options["workers"]), str(spill))


def _packet_length(rng: random.Random, data: bytes, frames: Frames, head: int
                   ) -> tuple[bytes, str]:
    """A packet's 3-byte length set out of range."""
    return size_field(rng, data, frames, 0, 3, lambda size: size - 4)


def _packet_status(rng: random.Random, data: bytes, frames: Frames, head: int
                   ) -> tuple[bytes, str]:
    """A packet's first byte (OK, EOF or ERR) changed."""
    if not frames:
        return data, "no packet"
    offset, _size = frames[rng.randrange(len(frames))]
    value = rng.choice((0x00, 0xFE, 0xFF, 0x01))
    at = offset + 4
    if at >= len(data):
        return data, "no packet"
    return data[:at] + bytes([value]) + data[at + 1:], \
        f"status byte of the packet at {offset} set to 0x{value:02x}"
