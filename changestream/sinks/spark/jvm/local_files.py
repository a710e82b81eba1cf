"""Local files without a process per file: a Hadoop file system class for ``file:`` paths.

Without its native library (PySpark ships none) Hadoop's local file system runs ``chmod``
in a new process for every file it creates (twice, with its ``.crc``), several per Iceberg
commit. :func:`local_files_jar` makes (once, cached) a jar holding
``changestream.hadoop.NioLocalFileSystem``: ``RawLocalFileSystem`` setting the permission
bits through Java's NIO, and writing no ``.crc`` (Parquet and Iceberg carry their own
checks). :func:`local_files_conf` makes it the driver's ``file:`` file system, for the
sessions the sink starts on a local master (a remote executor would not have the jar)."""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .jars import jar_cache, made_once

CLASS_NAME = "changestream.hadoop.NioLocalFileSystem"
_THIS = CLASS_NAME.replace(".", "/")
_SUPER = "org/apache/hadoop/fs/RawLocalFileSystem"
_PATH = "org/apache/hadoop/fs/Path"
_PERMISSION = "org/apache/hadoop/fs/permission/FsPermission"
FILE_IMPL = "spark.hadoop.fs.file.impl"
CLASS_PATH = "spark.driver.extraClassPath"


class _ConstantPool:
    """A class file's constant pool, built as entries are asked for (each made once)."""

    def __init__(self) -> None:
        self.entries: list[bytes] = []
        self.index: dict[tuple[Any, ...], int] = {}

    def _add(self, key: tuple[Any, ...], entry: bytes) -> int:
        if key not in self.index:
            self.entries.append(entry)
            self.index[key] = len(self.entries)  # indices start at 1
        return self.index[key]

    def utf8(self, text: str) -> int:
        data = text.encode("ascii")
        return self._add(("utf8", text), struct.pack(">BH", 1, len(data)) + data)

    def string(self, text: str) -> int:
        return self._add(("string", text), struct.pack(">BH", 8, self.utf8(text)))

    def klass(self, name: str) -> int:
        return self._add(("class", name), struct.pack(">BH", 7, self.utf8(name)))

    def method(self, owner: str, name: str, descriptor: str) -> int:
        pair = self._add(("nat", name, descriptor),
                         struct.pack(">BHH", 12, self.utf8(name), self.utf8(descriptor)))
        return self._add(("method", owner, name, descriptor),
                         struct.pack(">BHH", 10, self.klass(owner), pair))

    def encode(self) -> bytes:
        return struct.pack(">H", len(self.entries) + 1) + b"".join(self.entries)


def _method(pool: _ConstantPool, name: str, descriptor: str, code: bytes, max_stack: int,
            max_locals: int) -> bytes:
    """A public method with a Code attribute (no exception table, no sub-attributes)."""
    body = struct.pack(">HHI", max_stack, max_locals, len(code)) + code + struct.pack(">HH", 0, 0)
    return struct.pack(">HHHH", 0x0001, pool.utf8(name), pool.utf8(descriptor), 1) \
        + struct.pack(">HI", pool.utf8("Code"), len(body)) + body


def file_system_class() -> bytes:
    """The class file of ``NioLocalFileSystem`` (Java 8 format: runs on Java 8 to 21)."""
    # Written as bytes: its three methods have no branches, so it needs no compiler and no
    # stack maps. The sticky bit, which NIO cannot set and Hadoop never asks for on these
    # files, is left out.
    pool = _ConstantPool()
    aload_0, aload_1, aload_2, pop, ret, dup, iand = b"\x2a", b"\x2b", b"\x2c", b"\x57", \
        b"\xb1", b"\x59", b"\x7e"

    def invoke(opcode: int, owner: str, name: str, descriptor: str) -> bytes:
        return struct.pack(">BH", opcode, pool.method(owner, name, descriptor))

    special, virtual, static = 0xB7, 0xB6, 0xB8
    constructor = aload_0 + invoke(special, _SUPER, "<init>", "()V") + ret
    # Files.setPosixFilePermissions(pathToFile(path).toPath(),
    #     PosixFilePermissions.fromString(new FsPermission(permission.toShort() & 0777)
    #                                     .toString()))
    set_permission = (
        aload_0 + aload_1
        + invoke(virtual, _SUPER, "pathToFile", f"(L{_PATH};)Ljava/io/File;")
        + invoke(virtual, "java/io/File", "toPath", "()Ljava/nio/file/Path;")
        + struct.pack(">BH", 0xBB, pool.klass(_PERMISSION)) + dup  # new FsPermission
        + aload_2 + invoke(virtual, _PERMISSION, "toShort", "()S")
        + struct.pack(">BH", 0x11, 0o777) + iand  # sipush 0777; iand
        + invoke(special, _PERMISSION, "<init>", "(S)V")
        + invoke(virtual, _PERMISSION, "toString", "()Ljava/lang/String;")
        + invoke(static, "java/nio/file/attribute/PosixFilePermissions", "fromString",
                 "(Ljava/lang/String;)Ljava/util/Set;")
        + invoke(static, "java/nio/file/Files", "setPosixFilePermissions",
                 "(Ljava/nio/file/Path;Ljava/util/Set;)Ljava/nio/file/Path;")
        + pop + ret)
    # RawLocalFileSystem leaves getScheme() to FileSystem, which throws (LocalFileSystem,
    # the checksummed wrapper, is what answers "file" otherwise)
    scheme = struct.pack(">BB", 0x12, pool.string("file")) + b"\xb0"  # ldc; areturn
    methods = [
        _method(pool, "<init>", "()V", constructor, 1, 1),
        _method(pool, "getScheme", "()Ljava/lang/String;", scheme, 1, 1),
        _method(pool, "setPermission", f"(L{_PATH};L{_PERMISSION};)V", set_permission, 5, 3),
    ]
    this, parent = pool.klass(_THIS), pool.klass(_SUPER)
    return (struct.pack(">IHH", 0xCAFEBABE, 0, 52) + pool.encode()
            + struct.pack(">HHHHHH", 0x0021, this, parent, 0, 0, len(methods))
            + b"".join(methods) + struct.pack(">H", 0))


def local_files_jar(cache: Path | None = None) -> Path:
    """The jar holding ``NioLocalFileSystem`` (made once, cached by its content)."""
    data = file_system_class()
    digest = hashlib.sha256(data).hexdigest()[:12]
    return made_once(jar_cache(cache) / f"changestream-local-files-{digest}.jar",
                     lambda: iter([("META-INF/MANIFEST.MF", b"Manifest-Version: 1.0\r\n\r\n"),
                                   (f"{_THIS}.class", data)]))


def local_files_conf(conf: Mapping[str, Any], cache: Path | None = None) -> dict[str, str]:
    """Settings making ``NioLocalFileSystem`` the ``file:`` file system of a session on a
    local master; none when ``conf`` names a ``file:`` file system itself."""
    if FILE_IMPL in conf:
        return {}
    jar = str(local_files_jar(cache))
    class_path = str(conf.get(CLASS_PATH, ""))
    return {FILE_IMPL: CLASS_NAME,
            CLASS_PATH: f"{class_path}{os.pathsep}{jar}" if class_path else jar}
