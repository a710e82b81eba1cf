"""Finding the Iceberg runtime jar, and completing it when its shaded Jackson is missing.

The jar is the ``jar`` option, else ``CHANGESTREAM_ICEBERG_JAR``, else the one in the
``snowpark-connect-deps-iceberg`` package from PyPI (the only registry package that ships
``iceberg-spark-runtime-3.5_2.12``). That jar lacks the Jackson classes Iceberg relocates
(``NoClassDefFoundError ... JsonFactoryBuilder``): :func:`shaded_jackson_jar` makes them
once from PySpark's Jackson jars, relocated by rewriting the class files' constant pools,
and caches them under ``~/.cache/changestream/jars``. (The REST catalog's relocated HTTP
client is missing too; the Hadoop catalog does not need it.)"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import struct
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

from changestream.cache import cache_folder
from changestream.model.errors import SinkError

RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-*.jar"
ENV_JAR = "CHANGESTREAM_ICEBERG_JAR"
_SHADED = "org/apache/iceberg/shaded/"
_PROBE = _SHADED + "com/fasterxml/jackson/core/JsonFactoryBuilder.class"
_JACKSON = re.compile(r"jackson-(core|databind|annotations)-\d[\w.]*\.jar")


def find_iceberg_jar(jar: str | os.PathLike[str] | None = None) -> Path:
    """The Iceberg Spark runtime jar from ``jar``, the environment, or the pip package."""
    for candidate, origin in ((jar, "the 'jar' option"), (os.environ.get(ENV_JAR), ENV_JAR)):
        if candidate:
            path = Path(candidate).expanduser()
            if not path.is_file():
                raise SinkError(f"spark sink: Iceberg runtime jar {path} (from {origin}) "
                                "does not exist")
            return path
    spec = importlib.util.find_spec("snowpark_connect_deps_iceberg")
    if spec is not None and spec.origin:
        found = sorted((Path(spec.origin).parent / "jars").glob(RUNTIME_JAR))
        if found:
            return found[-1]
    raise SinkError("spark sink: no Iceberg runtime jar: pass jar=PATH, set "
                    f"{ENV_JAR}, or pip install snowpark-connect-deps-iceberg")


def iceberg_jars(jar: str | os.PathLike[str] | None = None,
                 cache: Path | None = None) -> list[Path]:
    """The runtime jar plus, when it lacks them, the relocated Jackson classes it needs."""
    runtime = find_iceberg_jar(jar)
    if zip_has_entry(runtime, _PROBE):
        return [runtime]
    return [runtime, shaded_jackson_jar(cache)]


#: A zip's end-of-central-directory record: its signature, and where its directory's size
#: and offset are (struct offsets from the signature).
_END_OF_DIRECTORY = b"PK\x05\x06"
_DIRECTORY_ENTRY = b"PK\x01\x02"
_ENTRY_HEADER = 46  # a central directory entry's fixed part; its name's length at 28


def zip_has_entry(path: Path, name: str) -> bool:
    """Whether zip ``path`` holds an entry named ``name``: its central directory searched
    as bytes (``zipfile`` makes an object per entry, 75 ms at every open for the Iceberg
    runtime jar's); ``zipfile`` itself for a zip this does not read (ZIP64, a prefix)."""
    wanted = name.encode()
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            tail_start = max(0, size - (65535 + 22))  # the record, and a comment's room
            f.seek(tail_start)
            tail = f.read()
            end = tail.rfind(_END_OF_DIRECTORY)
            if end < 0 or end + 22 > len(tail):
                raise ValueError("no end of central directory")
            directory_size, directory_offset = struct.unpack_from("<II", tail, end + 12)
            if directory_offset + directory_size != tail_start + end:
                raise ValueError("ZIP64, or bytes before the zip")
            f.seek(directory_offset)
            directory = f.read(directory_size)
    except (OSError, ValueError, struct.error):
        with zipfile.ZipFile(path) as z:
            return name in z.NameToInfo
    at = directory.find(wanted)
    while at >= 0:
        header = at - _ENTRY_HEADER
        if header >= 0 and directory[header:header + 4] == _DIRECTORY_ENTRY \
                and struct.unpack_from("<H", directory, header + 28)[0] == len(wanted):
            return True
        at = directory.find(wanted, at + 1)
    return False


def _pyspark_jackson() -> list[Path]:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise SinkError("spark sink: pyspark is not installed")
    jars = Path(spec.origin).parent / "jars"
    found = [p for p in sorted(jars.glob("jackson-*.jar")) if _JACKSON.fullmatch(p.name)]
    if len(found) != 3:
        raise SinkError(f"spark sink: cannot find Jackson core/databind/annotations in {jars}")
    return found


def jar_cache(cache: Path | None = None) -> Path:
    """The folder of the jars changestream makes (``~/.cache/changestream/jars``)."""
    return cache or cache_folder("jars")


def made_once(target: Path, entries: Callable[[], Iterator[tuple[str, bytes]]]) -> Path:
    """Jar ``target``, written from ``entries`` (name, bytes) unless it is there already
    (written beside it and moved into place: no reader sees half a jar)."""
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
        for name, data in entries():
            out.writestr(name, data)
    os.replace(tmp, target)
    return target


def shaded_jackson_jar(cache: Path | None = None) -> Path:
    """A jar of PySpark's Jackson relocated under ``org.apache.iceberg.shaded`` (cached)."""
    sources = _pyspark_jackson()
    digest = hashlib.sha256("|".join(p.name for p in sources).encode()).hexdigest()[:12]

    def relocated() -> Iterator[tuple[str, bytes]]:
        seen: set[str] = set()
        for source in sources:
            with zipfile.ZipFile(source) as z:
                for name in z.namelist():
                    new_name, data = _relocate_entry(name, z.read(name))
                    if new_name is None or new_name in seen:
                        continue
                    seen.add(new_name)
                    yield new_name, data

    return made_once(jar_cache(cache) / f"iceberg-shaded-jackson-{digest}.jar", relocated)


_SLASH = (b"com/fasterxml/jackson/", (_SHADED + "com/fasterxml/jackson/").encode())
_DOT = (b"com.fasterxml.jackson.", (_SHADED.replace("/", ".") + "com.fasterxml.jackson.").encode())


def _relocate_bytes(text: bytes) -> bytes:
    return text.replace(_SLASH[0], _SLASH[1]).replace(_DOT[0], _DOT[1])


def _relocate_entry(name: str, data: bytes) -> tuple[str | None, bytes]:
    if name.endswith("module-info.class") or name.startswith("META-INF/versions/"):
        return None, b""
    if name.endswith(".class") and name.startswith("com/fasterxml/jackson/"):
        return _SHADED + name, relocate_class(data)
    if name.startswith("META-INF/services/com.fasterxml.jackson."):
        service = name.rsplit("/", 1)[1]
        return ("META-INF/services/" + _relocate_bytes(service.encode()).decode(),
                _relocate_bytes(data))
    if name.startswith("META-INF/") and not name.endswith("/"):
        return None, b""  # manifests, signatures, licences of the originals
    if name.endswith("/"):
        return None, b""
    return _SHADED + name if name.startswith("com/") else None, data


# Sizes of constant-pool entries after the tag, by tag (Utf8 is variable).
_CP_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2,
             17: 4, 18: 4, 19: 2, 20: 2}


def relocate_class(data: bytes) -> bytes:
    """A class file with every Jackson name in its constant pool moved under the shaded
    prefix (slash form in descriptors and class names, dot form in strings)."""
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a class file")
    count = struct.unpack_from(">H", data, 8)[0]
    out = bytearray(data[:10])
    pos = 10
    index = 1
    while index < count:
        tag = data[pos]
        if tag == 1:
            length = struct.unpack_from(">H", data, pos + 1)[0]
            text = _relocate_bytes(data[pos + 3:pos + 3 + length])
            out += b"\x01" + struct.pack(">H", len(text)) + text
            pos += 3 + length
        else:
            size = _CP_SIZES[tag]
            out += data[pos:pos + 1 + size]
            pos += 1 + size
            if tag in (5, 6):
                index += 1  # longs and doubles take two slots
        index += 1
    out += data[pos:]
    return bytes(out)
