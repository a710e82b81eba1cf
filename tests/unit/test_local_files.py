"""The settings and the jar that make the sink's local Spark sessions write files without
a ``chmod`` process per file (the class itself is exercised in tests/spark)."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from changestream.sinks.spark.jvm.local_files import (
    CLASS_NAME,
    CLASS_PATH,
    FILE_IMPL,
    file_system_class,
    local_files_conf,
    local_files_jar,
)


def test_the_jar_holds_the_class_and_is_made_once(tmp_path: Path) -> None:
    jar = local_files_jar(tmp_path)
    with zipfile.ZipFile(jar) as z:
        data = z.read(CLASS_NAME.replace(".", "/") + ".class")
    assert data == file_system_class()
    assert data[:4] == b"\xca\xfe\xba\xbe" and data[6:8] == b"\x00\x34"  # Java 8 format
    made = jar.stat().st_mtime_ns
    assert local_files_jar(tmp_path) == jar and jar.stat().st_mtime_ns == made
    assert [p.name for p in tmp_path.iterdir()] == [jar.name]  # no staging file left


def test_settings_add_the_jar_to_the_class_path_the_user_gave(tmp_path: Path) -> None:
    settings = local_files_conf({}, tmp_path)
    assert settings == {FILE_IMPL: CLASS_NAME, CLASS_PATH: str(local_files_jar(tmp_path))}
    kept = local_files_conf({CLASS_PATH: "/opt/own.jar"}, tmp_path)[CLASS_PATH]
    assert kept == f"/opt/own.jar{os.pathsep}{local_files_jar(tmp_path)}"


def test_a_file_system_the_user_names_wins(tmp_path: Path) -> None:
    own = {FILE_IMPL: "org.apache.hadoop.fs.LocalFileSystem"}
    assert local_files_conf(own, tmp_path) == {}
