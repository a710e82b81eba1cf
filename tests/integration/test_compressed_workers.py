"""MySQL's compressed transactions (TRANSACTION_PAYLOAD) through the decode workers: taken by
their fast path when plain, left to the router when not, the same records either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from changestream.parallel.payloads import unpacked_segment
from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.transactions.filters import ChangeFilter
from tests.segments import compare_arrow_paths, compare_worker_paths, worker_segments
from tests.servers import shadow_command


def _workload(mysql: Any, db: str) -> tuple[str, int]:
    start = mysql.binlog_position()
    rows = ",".join(f"({i}, {i * 7}, 'row {i} ünï', {i}.25, '2024-02-0{1 + i % 9} 10:00:0{i % 10}')"
                    for i in range(1, 401))
    mysql.execute([
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, n INT, s VARCHAR(40), d DECIMAL(10,2), "
        "at DATETIME(3))",
        f"CREATE TABLE `{db}`.minimal (id INT PRIMARY KEY, v INT)",
        "SET SESSION binlog_transaction_compression = ON",
        f"INSERT INTO `{db}`.t VALUES {rows}",
        f"UPDATE `{db}`.t SET n = n + 1, s = 'changed' WHERE id <= 150",
        "BEGIN",
        f"DELETE FROM `{db}`.t WHERE id > 380",
        f"INSERT INTO `{db}`.t VALUES (1000, 1, 'in a transaction', 1.5, NULL)",
        "COMMIT",
        "SET SESSION binlog_transaction_compression = OFF",
        f"INSERT INTO `{db}`.t VALUES (1001, 2, 'plain', 2.5, NULL)",
        "SET SESSION binlog_transaction_compression = ON",
        # Without the names in its TABLE_MAP the router must decode it (schema history).
        "SET GLOBAL binlog_row_metadata = MINIMAL",
        f"INSERT INTO `{db}`.minimal VALUES (1, 10), (2, 20)",
        "SET GLOBAL binlog_row_metadata = FULL",
        f"INSERT INTO `{db}`.t VALUES (1002, 3, 'after', 3.5, NULL)",
    ])
    return start


def _records(path: Path) -> list[dict[str, Any]]:
    records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    for record in records:
        del record["ts"]
    return records


def test_compressed_transactions_go_to_the_workers(mysql: Any, tmp_path: Path) -> None:
    db = "compressed_workers"
    mysql.execute([f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}"])
    start = _workload(mysql, db)
    outputs = []
    for workers in (0, 2):
        out = tmp_path / f"workers-{workers}.jsonl"
        router = Router(RouterSettings(
            source=mysql.url, start=f"{start[0]}:{start[1]}", until="caught-up",
            filter=ChangeFilter(include=[db]), decode_workers=workers, decode_workers_wait=True,
            schema=HistorySettings("auto", shadow_command(mysql))),
            JsonLinesSink(out))
        router.run()
        assert (router.stats.reading.worker_segments > 0) == (workers > 0)
        outputs.append(_records(out))
    assert outputs[0] == outputs[1]
    assert len(outputs[0]) == 2 + 400 + 150 + 20 + 1 + 1 + 2 + 1
    assert [r["after"]["v"] for r in outputs[0]
            if r["table"] == "minimal" and r["op"] == "insert"] == [10, 20]

    files = mysql.binlog_files()
    files = files[[f.name for f in files].index(start[0]):]
    segments = worker_segments(files, start[1])
    compressed = [s for s in segments if s.payloads]
    assert compressed, "no compressed transaction went to a worker"
    # The MINIMAL table's transaction stayed with the router: its rows are in no segment.
    assert b"minimal" not in b"".join(
        u.data for s in compressed
        if (u := unpacked_segment(s.data, s.offsets, _zstd(), s.file, True, True)))
    # The fast path takes the compressed segments and writes what the general path writes.
    assert compare_worker_paths(compressed, ChangeFilter(include=[db])) in (
        len(compressed), None)  # None: the compiled path is not built
    # And the compiled Arrow path (the Spark sink's frames) what its general path makes.
    taken = compare_arrow_paths(compressed, ChangeFilter(include=[db]))
    if taken is not None:  # None: not built (and allowed to be missing in this run)
        assert taken == len(compressed)


def test_a_damaged_payload_is_left_to_the_general_path(mysql: Any) -> None:
    db = "compressed_damaged"
    mysql.execute([f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}"])
    start = _workload(mysql, db)
    files = mysql.binlog_files()
    files = files[[f.name for f in files].index(start[0]):]
    segment = next(s for s in worker_segments(files, start[1]) if s.payloads)
    at = 0
    for _offset in segment.offsets:  # flip a byte inside the first payload's frame
        size = int.from_bytes(segment.data[at + 9:at + 13], "little")
        if segment.data[at + 4] == 40:
            damaged = bytearray(segment.data)
            damaged[at + size - 10] ^= 0xFF
            break
        at += size
    assert unpacked_segment(bytes(damaged), segment.offsets, _zstd(), segment.file, True,
                            True) is None
    assert unpacked_segment(segment.data, segment.offsets, _zstd(), segment.file, True,
                            True) is not None


def _zstd() -> Any:
    import zstandard
    return zstandard.ZstdDecompressor()


def test_the_compiled_payload_check_says_what_the_python_one_says(mysql: Any) -> None:
    """Every TRANSACTION_PAYLOAD of the workload (plain, MINIMAL metadata, damaged, over the
    size limit) through both checks of the segmenter."""
    import pytest
    import zstandard

    from changestream.decoding.event_decoder import EventDecoder
    from changestream.native import compiled
    from changestream.parallel import segments
    from changestream.parallel.payloads import plain_payload_size
    from changestream.sources.files import FileSource

    native = compiled("changestream.native.zstd_frames")
    if native is None:
        pytest.skip("the compiled payload check is not built (no libzstd header)")
    db = "compressed_checks"
    mysql.execute([f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}"])
    start = _workload(mysql, db)
    files = mysql.binlog_files()
    files = files[[f.name for f in files].index(start[0]):]
    decoder = EventDecoder()
    segmenter = segments.Segmenter(decoder, None)  # type: ignore[arg-type]
    zstd = zstandard.ZstdDecompressor()
    seen = {True: 0, False: 0}
    for raw in FileSource(files, start_file=files[0].name, start_pos=4,
                          decoder=decoder).raw_events():
        if raw.data[4] == 15:
            decoder.decode(raw.data, raw.file, raw.offset)
        if raw.data[4] != 40:
            continue
        body = raw.data[19:-4]
        bodies = [body, body[:-7] + bytes(7)]  # and with its frame's end damaged
        for candidate in bodies:
            expected = plain_payload_size(candidate, raw.file, raw.offset, zstd,
                                          segmenter._inner_kind)
            for limit in (1 << 22, 100):
                got = native.plain_payload_size(candidate, segmenter._inner_kind,
                                                segments._ROW_FLAGS, 13, limit)
                want = expected if expected is None or expected <= limit else None
                assert got == want, (raw.offset, limit)
            seen[expected is not None] += 1
    assert seen[True] and seen[False]
