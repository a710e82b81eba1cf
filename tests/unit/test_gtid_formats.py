"""Tagged GTID formats, on bytes MySQL 9.7.4 wrote (captured from a private server; the
expected values are what its ``mysqlbinlog`` printed for the same events)."""

from __future__ import annotations

import uuid

import pytest
from pymysqlreplication.gtid import GtidSet

from changestream.decoding.event_decoder import CHECKSUM_CRC32, EventDecoder
from changestream.decoding.events import GtidEvent, PreviousGtidsEvent
from changestream.decoding.gtid_tagged import (
    _read_signed,
    _read_varlen,
    _write_varlen,
    decode_gtid_set,
    encode_gtid_set,
    format_gtid_set,
    parse_gtid_set,
)
from changestream.model.errors import BinlogError

SID = "a67ccd29-e56b-11f1-b171-02fc00000001"

# SET gtid_next='AUTOMATIC:mytag'; BEGIN; INSERT ...; COMMIT  (binlog.000001 at 529)
GTID_TAGGED = bytes.fromhex(
    "c22a016b2a01000000500000006102000000000272000000029902f83503529503d622c503c502e204f10300"
    "0000020404060a6d7974616708080a0c0c7fe0c8bb8ec260061055041283120bd6222fca")
# The PREVIOUS_GTIDS of binlog.000002, after two untagged and two tagged transactions.
PREVIOUS_GTIDS = bytes.fromhex(
    "c22a016b230100000076000000f500000080000102000000000001a67ccd29e56b11f1b17102fc0000000100"
    "010000000000000001000000000000000300000000000000a67ccd29e56b11f1b17102fc000000010a6d7974"
    "6167010000000000000001000000000000000300000000000000d2a3ae68")


def _decode(data: bytes) -> object:
    return EventDecoder(checksum_alg=CHECKSUM_CRC32).decode(data, "binlog.000001", 529)


def test_gtid_tagged_event_decodes_as_mysqlbinlog_prints_it() -> None:
    event = _decode(GTID_TAGGED)
    assert isinstance(event, GtidEvent)
    assert event.gtid == f"{SID}:mytag:1"
    assert (event.sid, event.tag, event.gno) == (uuid.UUID(SID), "mytag", 1)
    assert (event.last_committed, event.sequence_number) == (2, 3)
    assert event.immediate_commit_ts == event.original_commit_ts == 1795238594857184
    assert event.transaction_length == 277
    assert event.immediate_server_version == event.original_server_version == 90704
    assert event.commit_flag == 0 and not event.anonymous


def test_gtid_tagged_event_cut_short_is_a_clear_error() -> None:
    body_end = len(GTID_TAGGED) - 4
    cut = bytearray(GTID_TAGGED[:body_end - 10])
    cut[9:13] = (len(cut)).to_bytes(4, "little")  # a consistent header, no checksum
    with pytest.raises(BinlogError, match="corrupt GTID_TAGGED"):
        EventDecoder().decode(bytes(cut), "f", 4)


def test_previous_gtids_with_a_tag_decode_as_mysqlbinlog_prints_them() -> None:
    event = _decode(PREVIOUS_GTIDS)
    assert isinstance(event, PreviousGtidsEvent)
    assert event.gtid_set == f"{SID}:1-2:mytag:1-2"


def test_a_gtid_set_with_a_tag_encodes_as_mysql_does() -> None:
    body = PREVIOUS_GTIDS[19:-4]
    assert encode_gtid_set(f"{SID}:1-2:mytag:1-2") == body
    assert encode_gtid_set(f" {SID}:mytag:1-2,\n{SID.upper()}:1:2 ") == body


def test_a_gtid_set_without_tags_encodes_in_the_format_every_server_reads() -> None:
    text = f"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100,{SID}:1-5:7"
    assert encode_gtid_set(text) == GtidSet(text).encoded()
    sets, size = decode_gtid_set(encode_gtid_set(text))
    assert format_gtid_set(sets) == text and size == len(encode_gtid_set(text))


def test_gtid_set_text_is_normalised_as_mysql_prints_it() -> None:
    sets = parse_gtid_set(f"{SID}:B:3:a:1-2:5,{SID}:3-6:1-2,{SID}:b:4")
    assert format_gtid_set(sets) == f"{SID}:1-6:a:1-2:5:b:3-4"


@pytest.mark.parametrize("text", [f"{SID}:0", f"{SID}:5-3", "not-a-uuid:1", f"{SID}:1:9tag"])
def test_bad_gtid_set_text_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="GTID set"):
        parse_gtid_set(text)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 16383, 16384, 2**56 - 1, 2**56, 2**63,
                                   2**64 - 1])
def test_variable_length_integers_round_trip(value: int) -> None:
    encoded = _write_varlen(value)
    assert _read_varlen(encoded + b"\0", 0) == (value, len(encoded))


def test_signed_variable_length_integers_are_zigzag() -> None:
    assert [_read_signed(bytes([b]), 0)[0] for b in (0x00, 0x02, 0x04, 0x06)] == [0, -1, 1, -2]
