"""The binlog corpus: where it is, what to do when it is absent, and the servers' own decodes
in its ``reference/`` folder (the independent expectation for row counts per table and
operation, and for GTIDs).

The corpus is ``../shared/corpus`` beside the checkout, or the folder ``CHANGESTREAM_CORPUS``
names. Without it the corpus tests skip, or fail when ``CHANGESTREAM_REQUIRE_SERVERS`` is set
(``scripts/test.sh`` sets it): see docs/testing.md.
"""

from __future__ import annotations

import gzip
import os
import re
from collections import Counter
from pathlib import Path

from tests.servers import skip_or_fail

CORPUS_ENV = "CHANGESTREAM_CORPUS"
DEFAULT_CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
CORPUS = Path(os.environ.get(CORPUS_ENV) or DEFAULT_CORPUS)
REFERENCE = CORPUS / "reference"
#: The one parameter of a per-file test when the corpus is absent, so that the test still
#: runs (and skips or fails with the reason) instead of vanishing as an empty parameter set.
ABSENT = "corpus-absent"

_ROW = re.compile(r"^### (INSERT INTO|UPDATE|DELETE FROM) `([^`]*)`\.`([^`]*)`")
_MYSQL_GTID = re.compile(r"^SET @@SESSION\.GTID_NEXT= '([0-9a-f-]{36}:[^']+)'")
_MARIADB_GTID = re.compile(r"^#\d{6} .*\tGTID (\d+-\d+-\d+)")
_OPS = {"INSERT INTO": "insert", "UPDATE": "update", "DELETE FROM": "delete"}


def corpus_files() -> list[str]:
    """Every binlog file of the corpus, relative to it (none when the corpus is absent)."""
    if not CORPUS.is_dir():
        return []
    return sorted(str(p.relative_to(CORPUS)) for p in CORPUS.glob("*/*")
                  if p.parent.name != "reference" and p.is_file())


def corpus_params() -> list[str]:
    """Parameters for a test run once per corpus file: the files, or :data:`ABSENT` alone."""
    return corpus_files() or [ABSENT]


def require_corpus(*relative: str) -> Path:
    """The corpus folder, after checking that it holds binlogs, a ``reference/`` folder and
    each of ``relative``; else the test skips, or fails under ``CHANGESTREAM_REQUIRE_SERVERS``."""
    default = " (the default, ../shared/corpus beside the checkout)" if CORPUS == DEFAULT_CORPUS \
        else f" (from {CORPUS_ENV})"
    where = f"{CORPUS}{default}"
    if not CORPUS.is_dir():
        skip_or_fail(f"binlog corpus not found: no folder {where}; point {CORPUS_ENV} at a copy "
                     "(see docs/testing.md)")
    if not corpus_files() or not REFERENCE.is_dir():
        skip_or_fail(f"binlog corpus incomplete: {where} has no binlog files or no reference/ "
                     f"folder; point {CORPUS_ENV} at a copy (see docs/testing.md)")
    for name in relative:
        if not (CORPUS / name).exists():
            skip_or_fail(f"binlog corpus file not found: {CORPUS / name}")
    return CORPUS


def reference_path(relative: str) -> Path:
    """The reference decode for a corpus file: MariaDB's when there is one, else MySQL's."""
    stem = relative.replace("/", "__").removesuffix(".gz")
    mariadb = REFERENCE / f"{stem}.mariadb.txt.gz"
    return mariadb if mariadb.exists() else REFERENCE / f"{stem}.txt.gz"


def read_reference(relative: str) -> tuple[Counter[tuple[str, str]], list[str]]:
    """Row counts by ``(db.table, op)`` and the GTIDs, in order, from a reference decode."""
    counts: Counter[tuple[str, str]] = Counter()
    gtids: list[str] = []
    with gzip.open(reference_path(relative), "rt", errors="replace") as f:
        for line in f:
            if line.startswith("###"):
                m = _ROW.match(line)
                if m:
                    counts[(f"{m.group(2)}.{m.group(3)}", _OPS[m.group(1)])] += 1
            elif (m := _MYSQL_GTID.match(line)) or (m := _MARIADB_GTID.match(line)):
                gtids.append(m.group(1))
    return counts, gtids
