"""A backfill on a local Spark master decodes its units in helper processes of this machine
(changestream.sinks.backfill.decode_jobs.LocalDecodeJob): they stage what decode_unit stages
in the driver's own process, and a process that dies is a clear error naming the unit; a
cluster's master decodes on the executors."""

from __future__ import annotations

import os
import pickle
import signal
from pathlib import Path

import pytest

from changestream.model.errors import ConfigError, SinkError, SourceError
from changestream.sinks.backfill import BackfillSettings
from changestream.sinks.backfill.decode_jobs import LocalDecodeJob, local_processes
from changestream.sinks.backfill.decoding import (
    DdlItem,
    StagedPiece,
    UnitManifest,
    decode_unit,
    read_piece,
)
from changestream.sinks.backfill.planning import plan_units
from tests.corpus.reference import CORPUS
from tests.segments import FAST_PATH_FILES

FILES = sorted(str(CORPUS / name) for name in FAST_PATH_FILES)
UNSUPPORTED = str(CORPUS / "mariadb-test-data" / "binlog_old_version_4_1.000001")
ZSTD_FRAME = b"\x28\xb5\x2f\xfd"  # the magic number every zstd frame starts with


def _staged(manifest: UnitManifest) -> list[object]:
    """What a manifest says, with each piece's rows read back (paths differ)."""
    out: list[object] = [manifest.end, manifest.rows, manifest.transactions,
                         manifest.pending_xa, manifest.unmatched_xa, manifest.error]
    for item in manifest.items:
        if isinstance(item, DdlItem):
            out.append(("ddl", item.change.sql, item.position))
        else:
            assert isinstance(item, StagedPiece)
            out.append(("piece", item.database, item.table, item.signature, item.rows,
                        item.first, item.last, read_piece(item.path).to_pylist()))
    return out


def test_helper_processes_stage_what_the_driver_would(tmp_path: Path) -> None:
    units = plan_units([*FILES, UNSUPPORTED], 0)
    job = LocalDecodeJob(units, str(tmp_path / "processes"), 2, None, {}, processes=2)
    job.start()
    try:
        staged = [job.wait_for(unit) for unit in units[:-1]]
        # A binlog's fault found in a process is the driver's error, with its file.
        with pytest.raises(SourceError, match=r"binlog_old_version_4_1.000001 \[4, end\): "
                           "binlog format v3"):
            job.wait_for(units[-1])
    finally:
        job.stop()
    here = [decode_unit(unit, str(tmp_path / "here"), 2) for unit in units[:-1]]
    assert sum(m.rows for m in here) >= 8 and sum(len(m.items) for m in here) >= 6
    for unit, theirs, ours in zip(units[:-1], staged, here, strict=True):
        assert _staged(theirs) == _staged(ours), unit.describe()
    # The helpers' pieces are not compressed (the driver maps them); decode_unit's default,
    # a Spark task's on shared storage, are zstd.
    helpers = sorted((tmp_path / "processes").rglob("*.arrow"))
    tasks = sorted((tmp_path / "here").rglob("*.arrow"))
    assert len(helpers) == len(tasks) >= 6
    assert not any(ZSTD_FRAME in path.read_bytes() for path in helpers)
    assert all(ZSTD_FRAME in path.read_bytes() for path in tasks)


def test_a_decoding_process_that_dies_is_an_error_naming_its_unit(tmp_path: Path) -> None:
    units = plan_units(FILES, 0)
    job = LocalDecodeJob(units, str(tmp_path / "staging"), 50, None, {}, processes=1)
    job.start()
    try:
        job._children[0].send_signal(signal.SIGKILL)  # still starting: nothing staged yet
        with pytest.raises(SinkError, match=r"decoding process ended \(exit code -9\) while "
                           rf"it decoded {units[0].name} \[4, end\)"):
            job.wait_for(units[0])
        with pytest.raises(SinkError, match="exit code -9"):
            job.wait_for(units[-1])  # the units after it are not decoded
    finally:
        job.stop()
    assert job._children[0].poll() is not None


def test_a_manifest_pickles_without_the_process() -> None:
    # What a process hands the driver goes through pickle: the classes must be importable.
    manifest = UnitManifest(3, rows=5)
    assert pickle.loads(pickle.dumps(manifest)) == manifest


@pytest.mark.parametrize("master, processes", [
    ("local", 1), ("local[2]", 2), ("local[3,4]", 3), (" local[1] ", 1),
    ("local[*]", os.cpu_count() or 1), ("local[*,2]", os.cpu_count() or 1),
    ("spark://127.0.0.1:7077", None), ("yarn", None), ("local-cluster[2,1,1024]", None),
    ("k8s://https://host:443", None)])
def test_local_masters_give_their_cores_clusters_none(master: str,
                                                      processes: int | None) -> None:
    assert local_processes(master) == processes


def test_an_unknown_place_is_refused_naming_the_option() -> None:
    with pytest.raises(ConfigError, match=r"--decode-on 'gpu' is not one of auto, local, spark"):
        BackfillSettings(decode_on="gpu")


@pytest.mark.parametrize("relative", ["osheroff/mysql-bin.checksum-crc32",
                                      "osheroff/mysql-bin.sakila.gz"])
def test_a_units_lists_of_events_are_its_events_one_by_one(relative: str) -> None:
    """A unit's events in lists as read (what the segmenter's compiled walk takes) are its
    events one at a time: from its start to before its end, its file's FORMAT_DESCRIPTION
    first."""
    from changestream.decoding.event_decoder import EventDecoder
    from changestream.sinks.backfill.planning import BackfillUnit
    from changestream.sinks.backfill.unit_events import UnitSource
    from changestream.sources.files import FileSource

    path = str(CORPUS / relative)
    offsets = [raw.offset for raw in FileSource([path]).raw_events() if raw is not None]
    middle, later = offsets[len(offsets) // 3], offsets[2 * len(offsets) // 3]
    for start, end in ((4, None), (middle, later), (middle, None), (4, middle)):
        source = UnitSource(BackfillUnit(0, path, start, end), EventDecoder(), None)
        one_by_one = list(source.raw_stream())
        batches = list(source.raw_batches())
        assert [raw for batch in batches for raw in batch] == one_by_one, (start, end)
        assert all(batches) and one_by_one[-1].offset < (end or 1 << 62)
        assert len(batches) < len(one_by_one) // 4, "read one at a time"
