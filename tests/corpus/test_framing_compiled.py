"""The compiled framers (changestream.native.framing) against the Python readers' own loops:
every corpus file read whole, from a position inside it, and cut short, gives the same
events or the same error; a dump stream made of a corpus file's events (with the packets
the fast loop leaves to Python: ROTATE, end position 0, a 16 MB event in pieces, an error
packet) gives the same events and positions through the live reader."""

from __future__ import annotations

import gzip
import os
import random
import struct
from pathlib import Path
from typing import Any

import pytest

from changestream.decoding import event_types as et
from changestream.decoding.event_decoder import CHECKSUM_CRC32, EventDecoder
from changestream.decoding.query_kind import query_kind
from changestream.decoding.statements import BEGIN, COMMIT
from changestream.model.errors import ChangestreamError
from changestream.native import compiled
from changestream.sources import files, live
from changestream.sources.files import FileSource, read_raw_events
from changestream.sources.raw import RawEvent
from tests.corpus.reference import CORPUS, corpus_params


def _framing() -> Any:
    module = compiled("changestream.native.framing")
    if module is None:
        if os.environ.get("CHANGESTREAM_REQUIRE_SERVERS") == "1" and \
                os.environ.get("CHANGESTREAM_PURE_PYTHON") != "1":
            raise AssertionError("the compiled framing is not built "
                                 "(bash scripts/install.sh builds it with Cython)")
        pytest.skip("the compiled framing is not built")
    return module


def _read(path: Path, start: int, framing: Any) -> tuple[list[RawEvent], str | None]:
    saved = files._FRAMING
    files._FRAMING = framing
    out: list[RawEvent] = []
    try:
        for raw in read_raw_events(path, start):
            assert raw is not None
            out.append(raw)
    except ChangestreamError as exc:
        return out, str(exc)
    finally:
        files._FRAMING = saved
    return out, None


@pytest.mark.parametrize("relative", corpus_params())
def test_file_framing_equals_the_python_loop(relative: str, tmp_path: Path) -> None:
    framing = _framing()
    path = CORPUS / relative
    whole = _read(path, 4, None)
    assert _read(path, 4, framing) == whole
    events = whole[0]
    if len(events) > 3:  # from an event inside the file: its FDE, then from there
        middle = events[len(events) // 2].offset
        assert _read(path, middle, framing) == _read(path, middle, None)
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    rng = random.Random(relative)
    for cut in {len(data) - 1, rng.randrange(5, len(data)), 4 + 10}:
        short = tmp_path / f"cut-{cut}"
        short.write_bytes(data[:cut])
        assert _read(short, 4, framing) == _read(short, 4, None), cut


def _packet(payload: bytes, seq: int) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq & 0xFF]) + payload


def _dump_stream(events: list[RawEvent]) -> bytes:
    """``events`` as the server sends them, with the packets the fast loop does not take
    mixed in: a ROTATE first, one event with end position 0, one split at 16 MB."""
    out = bytearray()
    seq = 1
    name = b"stream-bin.000007"
    rotate = struct.pack("<IBIIIH", 0, et.ROTATE, 1, 19 + 8 + len(name), 0, 0x20) + \
        struct.pack("<Q", 4) + name
    out += _packet(b"\x00" + rotate, seq)
    for n, raw in enumerate(events):
        seq += 1
        data = raw.data
        if n == len(events) // 3:  # written without its end position
            data = data[:13] + b"\x00\x00\x00\x00" + data[17:]
        if n == len(events) // 2:  # as a payload over 16 MB: pieces of 0xFFFFFF bytes
            body = b"\x00" + data[:9] + struct.pack("<II", len(data) + 0x1000000,
                                                   raw.offset + 0x1000000) + \
                data[17:] + b"\x00" * 0x1000000
            while len(body) >= 0xFFFFFF:
                out += _packet(body[:0xFFFFFF], seq)
                body = body[0xFFFFFF:]
                seq += 1
            out += _packet(body, seq)
            continue
        out += _packet(b"\x00" + data, seq)
    out += _packet(b"\xff" + struct.pack("<H", 1236) + b"#HY000the end of the test", seq + 1)
    return bytes(out)


class _Socket:
    """What the live reader reads its dump stream from: the stream in random pieces."""

    def __init__(self, data: bytes, rng: random.Random):
        self.data, self.rng = data, rng

    def setblocking(self, flag: bool) -> None:
        pass

    def recv_into(self, buffer: memoryview) -> int:
        size = min(len(buffer), self.rng.choice((1, 7, 500, 4096, 1 << 20)))
        piece, self.data = self.data[:size], self.data[size:]
        buffer[:len(piece)] = piece
        return len(piece)


def _stream(data: bytes, framing: Any, seed: int, **options: Any) -> tuple[list[RawEvent], str]:
    saved = live._FRAMING
    live._FRAMING = framing
    decoder = options.pop("decoder", None)
    source = live.LiveSource({"host": "127.0.0.1"}, **options)
    source.decoder = decoder
    source._wait = lambda sock, timeout: True  # type: ignore[method-assign]

    class _Conn:
        _sock = _Socket(data, random.Random(seed))

    out: list[RawEvent] = []
    try:
        for batch in source._read_batches(_Conn(), idle=False):  # type: ignore[arg-type]
            assert batch
            out.extend(batch)
    except ChangestreamError as exc:
        return out, f"{exc} / {source.file}:{source.pos}"
    finally:
        live._FRAMING = saved
    return out, f"ended at {source.file}:{source.pos}"


@pytest.mark.parametrize("relative", ["osheroff/mysql-bin.sakila.gz",
                                      "osheroff/mysql-bin.checksum-crc32",
                                      "mariadb-test-data/master-bin-seq_10.3.36.000001"])
def test_dump_framing_equals_the_python_loop(relative: str) -> None:
    framing = _framing()
    events, error = _read(CORPUS / relative, 4, None)
    assert error is None and len(events) > 10
    data = _dump_stream(events[1:])
    for seed in range(3):
        fast = _stream(data, framing, seed)
        assert fast == _stream(data, None, seed)
        assert len(fast[0]) == len(events)  # the ROTATE and every event
        assert fast[0][1].file == "stream-bin.000007"
        assert "the end of the test" in fast[1]


def _bare_bracket(raw: RawEvent, decoder: EventDecoder) -> bool:
    tail = 4 if decoder.checksum_alg == CHECKSUM_CRC32 else 0
    return raw.data[4] == et.QUERY and \
        query_kind(raw.data, 13, len(raw.data) - tail) in (BEGIN, COMMIT) and \
        raw.data[-tail - 6 if tail else -6:len(raw.data) - tail].endswith((b"BEGIN", b"COMMIT"))


@pytest.mark.parametrize("relative", ["osheroff/mysql-bin.sakila.gz",
                                      "osheroff/mysql-bin.checksum-crc32",
                                      "mariadb-test-data/master-bin-seq_10.3.36.000001"])
def test_a_dump_stream_read_for_few_types_leaves_out_the_others(relative: str) -> None:
    """What the schema history's scan reads: the wanted types but bare BEGIN and COMMIT,
    every one of them, in order, and most other events left out unread; with ``until``, the
    stream ends once it has passed that position."""
    framing = _framing()
    events, error = _read(CORPUS / relative, 4, None)
    assert error is None
    decoder = EventDecoder()
    decoder.decode(events[0].data, relative, 4)  # the file's checksum
    data = _dump_stream(events[1:])
    everything = _stream(data, None, 0)[0]
    wanted = frozenset({et.QUERY, et.FORMAT_DESCRIPTION})
    needed = [raw for raw in everything
              if raw.data[4] in wanted and not _bare_bracket(raw, decoder)]
    assert len(needed) < len(everything) // 2
    for seed in range(3):
        read, ended = _stream(data, framing, seed, decoder=decoder, wanted_types=wanted,
                              skip_begin_commit=True)
        assert "the end of the test" in ended
        # (compared without the file's name: the test's ROTATE has no checksum to drop)
        got = [(raw.offset, raw.data) for raw in read]
        assert [event for event in got if event in
                {(raw.offset, raw.data) for raw in needed}] == [(raw.offset, raw.data)
                                                              for raw in needed]
        # Left out: all but the few in packets the fast loop does not take.
        assert len(read) <= len(needed) + 4, [et.event_type_name(r.data[4]) for r in read]
        assert not [raw for raw in read if _bare_bracket(raw, decoder)
                    and raw.data[13:17] != b"\x00" * 4]
    # Until a position: the stream ends after the event there (a reader checks offsets).
    middle = everything[len(everything) // 2 + 5]
    read, ended = _stream(data, framing, 0, until=(middle.file, middle.offset))
    assert ended.startswith("ended at"), ended
    assert middle in read and read == everything[:len(read)]


@pytest.mark.parametrize("framing", ["compiled", "python"])
def test_a_gzipped_file_read_from_inside_is_the_plain_file_read_from_there(
        framing: str, tmp_path: Path) -> None:
    """A start inside a gzip'd binlog (a backfill unit's, a run's position) gives the events
    the same file unpacked gives from there: its FORMAT_DESCRIPTION, then from the start."""
    framer = _framing() if framing == "compiled" else None
    packed = CORPUS / "osheroff/mysql-bin.sakila.gz"
    plain = tmp_path / "mysql-bin.sakila"
    plain.write_bytes(gzip.decompress(packed.read_bytes()))
    offsets = [raw.offset for raw in _read(plain, 4, None)[0]]
    for start in (offsets[1], offsets[len(offsets) // 3], offsets[-1], 5_000_000):
        got, error = _read(packed, start, framer)
        want = _read(plain, start, framer)
        assert error is None and want[1] is None
        assert [(r.offset, r.data) for r in got] == [(r.offset, r.data) for r in want[0]]
        assert len(got) > 1 or start > offsets[-1], start
    # A run resuming inside the packed file, as from a saved position.
    resumed = FileSource([packed], start_file=packed.name, start_pos=offsets[100])
    assert [(r.offset, r.data) for r in resumed.raw_events() if r is not None] == \
        [(r.offset, r.data) for r in _read(plain, offsets[100], None)[0]]
