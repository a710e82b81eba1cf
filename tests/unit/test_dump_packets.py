"""The live source's packet reader on bytes served through a socket: a private MariaDB's
recorded COM_BINLOG_DUMP reply (tests/fuzz_data/) read to its end and on to records, and the
damaged packets the fuzz harness found (tests/fuzzing.py), each a one-line error naming the
binlog file and position instead of an IndexError or a struct.error (or, for an event whose
size field is not its packet's, a decode worker cutting a segment's events apart wrongly)."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import pytest

from changestream.decoding import event_types as et
from changestream.decoding.event_decoder import CHECKSUM_OFF, EventDecoder
from changestream.model.errors import BinlogError, ConnectionLostError, PurgedPositionError
from changestream.sources import live
from changestream.sources.live import LiveSource
from changestream.sources.raw import RawEvent
from tests.binlog_bytes import event
from tests.fuzz_binlogs import EOF_PACKET, _Connection, captures, read_packets


def _packet(payload: bytes, seq: int = 1) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq]) + payload


def _read(data: bytes) -> list[RawEvent]:
    reader, writer = socket.socketpair()
    writer.sendall(data)
    writer.close()
    source = LiveSource({}, blocking=False, decoder=EventDecoder(checksum_alg=CHECKSUM_OFF))
    source.file, source.pos = "mariadb-bin.000001", 4
    try:
        return [e for batch in source._read_batches(_Connection(reader),  # type: ignore[arg-type]
                                                    idle=False) if batch for e in batch]
    finally:
        reader.close()


def test_the_recorded_capture_is_read_to_its_end_and_on_to_records(tmp_path: Path) -> None:
    (capture,) = captures()
    events = _read(capture.data)
    codes = [e.data[4] for e in events]
    assert codes[:2] == [et.ROTATE, et.FORMAT_DESCRIPTION] and len(events) == 37
    assert codes.count(et.WRITE_ROWS_V1) == 3 and codes.count(et.XID) == 4
    # 11 changes (4 DDL, 7 rows), each written in both record formats.
    assert read_packets(capture.data, capture.file, capture.checksum_alg, True, False,
                        str(tmp_path)) == 22


def test_a_packet_too_short_for_an_event_header_is_a_binlog_error() -> None:
    with pytest.raises(BinlogError, match="too short for an event: 4 bytes") as info:
        _read(_packet(b"\x00abcd") + EOF_PACKET)
    assert info.value.file == "mariadb-bin.000001" and info.value.offset == 4


def test_a_rotate_too_short_for_its_position_is_a_binlog_error() -> None:
    rotate = event(et.ROTATE, b"\x04\x00\x00")
    with pytest.raises(BinlogError, match="ROTATE event too short: 22 bytes"):
        _read(_packet(b"\x00" + rotate) + EOF_PACKET)


def test_an_empty_packet_at_the_end_of_what_came_is_skipped() -> None:
    with pytest.raises(ConnectionLostError, match="connection closed"):
        _read(_packet(b""))
    assert _read(_packet(b"") + EOF_PACKET) == []


def test_a_server_error_with_line_breaks_is_one_line() -> None:
    error = b"\xff" + struct.pack("<H", 1236) + b"#HY000" + b"could not find\nthe file\r"
    with pytest.raises(PurgedPositionError) as info:
        _read(_packet(error))
    assert len(str(info.value).splitlines()) == 1 and "could not find\\nthe file\\r" in \
        str(info.value)


@pytest.mark.parametrize("framing", ["compiled", "python"])
def test_an_event_whose_size_field_is_not_its_packets_is_a_binlog_error(
        framing: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if framing == "python":
        monkeypatch.setattr(live, "_FRAMING", None)
    elif live._FRAMING is None:
        pytest.skip("the compiled framing module is not built")
    xid = bytearray(event(et.XID, struct.pack("<Q", 9), log_pos=300))
    struct.pack_into("<I", xid, 9, len(xid) - 4)  # the packet holds 4 bytes more
    with pytest.raises(BinlogError, match="XID event's size field says 23 bytes, its packet "
                                          "holds 27") as info:
        _read(_packet(b"\x00" + bytes(xid)) + EOF_PACKET)
    assert info.value.file == "mariadb-bin.000001"
