"""The ``file:`` file system of the sink's local sessions (sinks/spark/jvm/local_files.py):
files and folders get the permissions Hadoop asks for, through Java's NIO."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from changestream.sinks.spark.jvm.local_files import CLASS_NAME


def _file_system(spark: Any) -> Any:
    jvm = spark._jvm
    return jvm.org.apache.hadoop.fs.FileSystem.get(
        jvm.java.net.URI("file:///"), spark._jsc.hadoopConfiguration())


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_session_writes_local_files_through_nio(spark: Any, tmp_path: Path) -> None:
    jvm, fs = spark._jvm, _file_system(spark)
    assert fs.getClass().getName() == CLASS_NAME
    assert fs.getScheme() == "file"
    umask = os.umask(0)
    os.umask(umask)

    created = tmp_path / "made.bin"
    out = fs.create(jvm.org.apache.hadoop.fs.Path(str(created)), False)
    out.write(b"abc")
    out.close()
    assert created.read_bytes() == b"abc"
    assert _mode(created) == 0o666 & ~umask  # Hadoop's file default under the umask
    assert not (tmp_path / ".made.bin.crc").exists()

    permission = jvm.org.apache.hadoop.fs.permission.FsPermission
    fs.setPermission(jvm.org.apache.hadoop.fs.Path(str(created)), permission(0o640))
    assert _mode(created) == 0o640
    folder = tmp_path / "a" / "b"
    assert fs.mkdirs(jvm.org.apache.hadoop.fs.Path(str(folder)), permission(0o750))
    assert _mode(folder) == 0o750 & ~umask
    # NIO cannot set the sticky bit: the other bits are set and it is left out
    fs.setPermission(jvm.org.apache.hadoop.fs.Path(str(folder)), permission(0o1771))
    assert _mode(folder) == 0o771
