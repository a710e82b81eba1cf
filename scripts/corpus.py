"""Build the binlog corpus the corpus tests read (docs/testing.md#the-binlog-corpus).

Each file listed in ``corpus-sources.tsv`` comes from its public source at a pinned commit
or package version (or, with ``--from DIR`` / ``CHANGESTREAM_CORPUS_FROM=DIR``, from a
local folder laid out as the corpus), is checked against the SHA-256 the list holds, and
is written under DEST as the corpus keeps it; then the servers' own decodes go into
``DEST/reference``. A file that cannot be had is one line naming it and its source; the
others are still built, and the exit status is 1. Needs only Python's standard library,
``dpkg-deb`` for the Debian packages, MariaDB's ``mariadb-binlog`` and the MySQL sid root's
``mysqlbinlog`` (scripts/setup-mysql-root.sh) for the decodes.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

SOURCES = Path(__file__).with_name("corpus-sources.tsv")
CACHE = Path.home() / ".cache" / "changestream"
DEFAULT_DEST = CACHE / "corpus"
MYSQL_ROOT = Path(os.environ.get("CHANGESTREAM_MYSQL_ROOT", CACHE / "mysql-sid-root"))
MARIADB_BINLOG = "mariadb-binlog"
TIMEOUT = 120  # seconds for one download


@dataclass(frozen=True)
class CorpusFile:
    """One file of the corpus: where it goes, what it must hash to, where it comes from."""

    path: str
    sha256: str
    source: str  # github:OWNER/REPO@COMMIT or deb:URL
    path_at_source: str
    decoders: tuple[str, ...]

    @property
    def origin(self) -> str:
        """Its source and path there, as a line names them."""
        return f"{self.source} {self.path_at_source}"


class Unavailable(Exception):
    """A file that could not be had (the message says why)."""


def read_sources(path: Path = SOURCES) -> list[CorpusFile]:
    """The corpus files ``path`` lists."""
    files = []
    lines = [line for line in path.read_text().splitlines()
             if line and not line.startswith("#")]
    for line in lines[1:]:  # the header
        name, sha, source, at_source, decoders = line.split("\t")
        files.append(CorpusFile(name, sha, source, at_source, tuple(decoders.split(","))))
    return files


def _download(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            return bytes(response.read())
    except OSError as exc:
        raise Unavailable(f"cannot download {url}: {_reason(exc)}") from None


def _reason(exc: OSError) -> str:
    return str(getattr(exc, "reason", None) or exc)


def _from_github(source: str, path: str) -> bytes:
    repo, commit = source[len("github:"):].split("@")
    return _download(f"https://raw.githubusercontent.com/{repo}/{commit}/{path}")


def _package(url: str) -> Path:
    """The Debian package at ``url``, downloaded once into the cache."""
    name = urllib.request.url2pathname(url.rsplit("/", 1)[1])
    cached = CACHE / "debs" / name
    if not cached.exists():
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(".part")
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT) as response, \
                    partial.open("wb") as out:
                shutil.copyfileobj(response, out, 1 << 20)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise Unavailable(f"cannot download {url}: {_reason(exc)}") from None
        partial.rename(cached)
    return cached


def _from_package(source: str, path: str) -> bytes:
    deb = _package(source[len("deb:"):])
    if shutil.which("dpkg-deb") is None:
        raise Unavailable("dpkg-deb is not installed")
    found = None
    with subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None
        try:
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                for member in tar:
                    if member.name.removeprefix("./") == path:
                        extracted = tar.extractfile(member)
                        found = extracted.read() if extracted else None
                        break
        except tarfile.TarError as exc:
            deb.unlink(missing_ok=True)  # a damaged download: fetched again next time
            raise Unavailable(f"cannot read {deb}: {exc}") from None
        finally:
            proc.kill()
    if found is None:
        raise Unavailable(f"{deb.name} has no {path}")
    return found


def fetch(file: CorpusFile, local: Path | None) -> bytes:
    """The bytes of ``file``: from the folder ``local`` when given, else from its source."""
    if local is not None:
        try:
            return (local / file.path).read_bytes()
        except OSError as exc:
            raise Unavailable(f"cannot read {local / file.path}: {exc.strerror}") from None
    if file.source.startswith("github:"):
        return _from_github(file.source, file.path_at_source)
    if file.source.startswith("deb:"):
        return _from_package(file.source, file.path_at_source)
    raise Unavailable(f"unknown source kind {file.source!r}")


def place(file: CorpusFile, dest: Path, local: Path | None) -> None:
    """Write ``file`` under ``dest`` unless it is there with the right hash."""
    target = dest / file.path
    if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == file.sha256:
        return
    data = fetch(file, local)
    digest = hashlib.sha256(data).hexdigest()
    if digest != file.sha256:
        where = local / file.path if local is not None else file.origin
        raise Unavailable(f"{where} has SHA-256 {digest}, expected {file.sha256}")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    partial.write_bytes(data)
    partial.rename(target)


def _sid_program(root: Path, program: str) -> list[str] | None:
    """``[loader, --library-path, dirs, program]``: a program of the sid root under the
    root's own C library (bookworm's is too old for it); ``None`` when it is missing."""
    loaders = sorted(root.glob("lib64/ld-linux*.so.*"))
    if not loaders or not (root / program).exists():
        return None
    dirs = [str(p) for pattern in ("usr/lib/*-linux-gnu", "lib/*-linux-gnu")
            for p in sorted(root.glob(pattern)) if p.is_dir()]
    return [str(loaders[0]), "--library-path", ":".join(dirs), str(root / program)]


def decoders() -> dict[str, list[str] | None]:
    """The command of each decoder a reference comes from (``None``: not installed)."""
    mariadb = shutil.which(MARIADB_BINLOG)
    return {"mysql": _sid_program(MYSQL_ROOT, "usr/bin/mysqlbinlog"),
            "mariadb": [mariadb] if mariadb else None}


def reference_name(file: CorpusFile, decoder: str) -> str:
    """``reference/NAME``: the file's path with ``/`` as ``__``, a ``.gz`` suffix dropped."""
    base = file.path.removesuffix(".gz").replace("/", "__")
    return f"{base}.mariadb.txt.gz" if decoder == "mariadb" else f"{base}.txt.gz"


def write_references(file: CorpusFile, dest: Path,
                     commands: dict[str, list[str] | None]) -> None:
    """The decodes of ``file`` into ``dest/reference``: each decoder's text output, up to
    where it stopped when it refuses the file (as the corpus keeps them)."""
    folder = dest / "reference"
    folder.mkdir(exist_ok=True)
    source = dest / file.path
    with tempfile.TemporaryDirectory() as scratch:
        if file.path.endswith(".gz"):
            plain = Path(scratch) / source.name.removesuffix(".gz")
            plain.write_bytes(gzip.decompress(source.read_bytes()))
            source = plain
        for decoder in file.decoders:
            target = folder / reference_name(file, decoder)
            if target.exists():
                continue
            command = commands.get(decoder)
            if command is None:
                tool = "mysqlbinlog (scripts/setup-mysql-root.sh)" if decoder == "mysql" \
                    else MARIADB_BINLOG
                raise Unavailable(f"no {tool} to write {target.name}")
            text = subprocess.run([*command, "-vv", "--base64-output=DECODE-ROWS",
                                   str(source)], capture_output=True, check=False).stdout
            partial = target.with_name(target.name + ".part")
            with gzip.GzipFile(partial, "wb", mtime=0) as out:
                out.write(text)
            partial.rename(target)


def build(dest: Path, local: Path | None, files: list[CorpusFile]) -> list[str]:
    """Build the corpus into ``dest``; the lines that say what could not be done."""
    problems = []
    commands = decoders()
    for file in files:
        try:
            place(file, dest, local)
            write_references(file, dest, commands)
        except Unavailable as exc:
            problems.append(f"corpus: {file.path}: {exc}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", nargs="?", type=Path, default=DEFAULT_DEST,
                        help=f"where the corpus goes (default {DEFAULT_DEST})")
    parser.add_argument("--from", dest="local", type=Path,
                        default=os.environ.get("CHANGESTREAM_CORPUS_FROM") or None,
                        help="take the files from this folder, laid out as the corpus, "
                             "instead of downloading them (CHANGESTREAM_CORPUS_FROM)")
    args = parser.parse_args(argv)
    files = read_sources()
    problems = build(args.dest, args.local, files)
    for line in problems:
        print(line, file=sys.stderr)
    built = len(files) - len(problems)
    print(f"corpus: {built} of {len(files)} files with their reference decodes in "
          f"{args.dest}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
