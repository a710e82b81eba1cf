"""Whether a jar holds an entry, read from its central directory as bytes
(sinks/spark/jvm/jars.py: zip_has_entry), against zipfile."""

from __future__ import annotations

import random
import zipfile
from pathlib import Path

import pytest

from changestream.sinks.spark.jvm.jars import zip_has_entry

NAMES = ["a/b.class", "x/a/b.class", "a/b.class.bak", "a/", "c/d/e/F$1.class", "é/ü.txt"]


def _zip(path: Path, names: list[str], comment: bytes = b"", prefix: bytes = b"") -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name in names:
            z.writestr(name, name * 3)
        z.comment = comment
    if prefix:
        path.write_bytes(prefix + path.read_bytes())
    return path


@pytest.mark.parametrize("comment, prefix", [(b"", b""), (b"a comment", b""),
                                             (b"", b"#!/bin/sh\nexit 0\n")])
def test_entries_are_found_as_zipfile_finds_them(tmp_path: Path, comment: bytes,
                                                 prefix: bytes) -> None:
    path = _zip(tmp_path / "t.jar", NAMES, comment, prefix)
    for name in NAMES:
        assert zip_has_entry(path, name), name
    for absent in ("b.class", "a/b", "a/b.clas", "x/a/b.class.bak", "", "a", "A/B.CLASS"):
        assert zip_has_entry(path, absent) == (absent in zipfile.ZipFile(path).namelist())


def test_an_empty_zip_and_a_file_that_is_not_one(tmp_path: Path) -> None:
    assert not zip_has_entry(_zip(tmp_path / "empty.jar", []), "a/b.class")
    junk = tmp_path / "junk.jar"
    junk.write_bytes(b"not a zip at all")
    with pytest.raises(zipfile.BadZipFile):
        zip_has_entry(junk, "a/b.class")


def test_the_iceberg_runtime_jar_agrees_with_zipfile() -> None:
    from changestream.model.errors import SinkError
    from changestream.sinks.spark.jvm.jars import _PROBE, find_iceberg_jar

    try:
        jar = find_iceberg_jar(None)
    except SinkError:
        pytest.skip("no Iceberg runtime jar here")
    names = zipfile.ZipFile(jar).namelist()
    sample = random.Random(5).sample(names, 300)
    assert all(zip_has_entry(jar, name) for name in sample)
    assert not any(zip_has_entry(jar, name + "x") or zip_has_entry(jar, name[1:])
                   for name in sample if name + "x" not in names and name[1:] not in names)
    assert zip_has_entry(jar, _PROBE) == (_PROBE in names)
