"""Reading the servers' own decodes in ../shared/corpus/reference: the independent expectation
for row counts per table and operation, and for GTIDs."""

from __future__ import annotations

import gzip
import re
from collections import Counter
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
REFERENCE = CORPUS / "reference"

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
