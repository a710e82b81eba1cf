"""scripts/corpus.sh builds the corpus on a machine that lacks it: from a local folder laid
out as the corpus (``--from``, as machines without access to the public repositories do),
each file checked against its SHA-256 and the references written with the local decoders;
the corpus tests pass on what it built. A file it cannot have is one line naming it."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import skip_or_fail

from .reference import CORPUS, CORPUS_ENV, require_corpus

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "corpus.sh"
MYSQL_ROOT = Path(os.environ.get("CHANGESTREAM_MYSQL_ROOT")
                  or Path.home() / ".cache" / "changestream" / "mysql-sid-root")


def _decoders() -> None:
    if shutil.which("mariadb-binlog") is None or \
            not (MYSQL_ROOT / "usr" / "bin" / "mysqlbinlog").exists():
        skip_or_fail("the corpus script needs mariadb-binlog and the MySQL sid root's "
                     "mysqlbinlog (scripts/install.sh --test)")


def _text(reference: Path) -> bytes:
    """A reference decode, less the temporary file name a decoder gives old LOAD DATA
    events (it differs from run to run)."""
    return re.sub(rb"INFILE '/tmp/[^']*'", b"INFILE ''", gzip.decompress(reference.read_bytes()))


def _build(dest: Path, source: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), str(dest), "--from", str(source)],
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_corpus_built_from_a_local_folder_passes_the_corpus_tests(tmp_path: Path) -> None:
    require_corpus()
    _decoders()
    dest = tmp_path / "corpus"
    # Only the binlogs: the references are the script's to write.
    source = tmp_path / "files"
    shutil.copytree(CORPUS, source, ignore=shutil.ignore_patterns("reference"))
    done = _build(dest, source)
    assert done.returncode == 0, done.stderr
    assert "21 of 21 files" in done.stderr
    built = sorted(p.relative_to(dest) for p in dest.rglob("*") if p.is_file())
    kept = sorted(p.relative_to(CORPUS) for p in CORPUS.rglob("*")
                  if p.is_file() and p.parent.name != CORPUS.name)  # not README/SOURCES
    assert built == kept
    for name in (CORPUS / "reference").iterdir():  # the decoders' own text, as kept
        assert _text(dest / "reference" / name.name) == _text(name), name.name
    # The corpus tests on the built corpus.
    env = {**os.environ, CORPUS_ENV: str(dest), "CHANGESTREAM_REQUIRE_SERVERS": "1"}
    tests = Path(__file__).parent
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(tests / "test_corpus_files.py"), str(tests / "test_inspect_cli.py")],
        env=env, capture_output=True, text=True, timeout=600, check=False,
        cwd=tests.parents[1])
    assert run.returncode == 0, run.stdout[-3000:]
    assert " failed" not in run.stdout and " passed" in run.stdout
    # Built again: nothing to do, and nothing changed.
    before = {p: p.stat().st_mtime_ns for p in dest.rglob("*") if p.is_file()}
    assert _build(dest, source).returncode == 0
    assert {p: p.stat().st_mtime_ns for p in dest.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("fault", ["altered", "missing"])
def test_a_file_it_cannot_have_is_one_line_naming_it(tmp_path: Path, fault: str) -> None:
    require_corpus()
    _decoders()
    source = tmp_path / "files"
    shutil.copytree(CORPUS, source, ignore=shutil.ignore_patterns("reference"))
    bad = source / "gh-ost" / "mysql-bin.000066"
    if fault == "altered":
        data = bytearray(bad.read_bytes())
        data[200] ^= 0xFF
        bad.write_bytes(bytes(data))
    else:
        bad.unlink()
    dest = tmp_path / "corpus"
    done = _build(dest, source)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 2 and "Traceback" not in done.stderr
    assert lines[0].startswith("corpus: gh-ost/mysql-bin.000066: ") and str(bad) in lines[0]
    assert ("expected e11519750d77" in lines[0]) if fault == "altered" else \
        ("cannot read" in lines[0])
    assert lines[1].startswith("corpus: 20 of 21 files")
    assert not (dest / "gh-ost" / "mysql-bin.000066").exists()
    assert (dest / "tiflow" / "mysql-bin.000001").exists()  # the others are built
