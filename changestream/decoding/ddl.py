"""Reading DDL statements from QUERY events: what kind of change, on which tables.

Handles what servers really log: comments (``/* ... */``, ``-- ``, ``#``; versioned
``/*!50100 ... */`` comments count as code), statements over several lines, quoted names
(backticks with doubled backticks inside, ANSI double quotes), qualified names, several
tables in one statement, and online-schema-change cut-overs (``RENAME TABLE a TO a_old,
a_new TO a``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import field

from changestream.model.record import record


@record(frozen=True)
class TableName:
    database: str | None
    table: str

    def __str__(self) -> str:
        return f"{self.database}.{self.table}" if self.database else self.table


@record
class DdlStatement:
    """A DDL statement as changestream understands it.

    ``kind`` is e.g. ``create_table``, ``alter_table``, ``rename_table``, ``drop_table``,
    ``truncate_table``, ``create_database``, ``drop_database``, ``alter_database``,
    ``create_index``, ``drop_index`` or ``other`` (views, routines, triggers, events ...).
    ``tables`` are the tables whose shape it changes (renames list both old and new names);
    ``database`` is the database of a database-level statement.
    """

    kind: str
    tables: list[TableName] = field(default_factory=list)
    renames: list[tuple[TableName, TableName]] = field(default_factory=list)
    database: str | None = None

    @property
    def changes_tables(self) -> bool:
        return bool(self.tables) or self.kind in ("drop_database", "create_database")


def strip_comments(sql: str) -> str:
    """``sql`` without comments; the content of versioned ``/*!NNNNN ... */`` comments kept."""
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"`":
            j = i + 1
            while j < n:
                if sql[j] == "\\" and c != "`":
                    j += 2
                    continue
                if sql[j] == c:
                    if j + 1 < n and sql[j + 1] == c:
                        j += 2
                        continue
                    break
                j += 1
            out.append(sql[i:j + 1])
            i = j + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end
            if sql.startswith("/*!", i) or sql.startswith("/*M!", i):
                body = sql[i + 3:end] if sql[i + 2] == "!" else sql[i + 4:end]
                out.append(" " + re.sub(r"^\d{5,6}", "", body) + " ")
            else:
                out.append(" ")
            i = end + 2
        elif (sql.startswith("--", i) and (i + 2 >= n or sql[i + 2] in " \t\r\n")) or c == "#":
            end = sql.find("\n", i)
            i = n if end < 0 else end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_clauses(sql: str) -> list[str]:
    """The comma-separated clauses of an ALTER TABLE, commas inside () or quotes kept."""
    parts, depth, quote, current = [], 0, "", []
    for ch in sql:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return parts


_COLUMN_CLAUSE = re.compile(
    r"\b(ADD|MODIFY|CHANGE)\s+(?:COLUMN\s+)?(?:IF\s+(?:NOT\s+)?EXISTS\s+)?"
    r"(`(?:[^`]|``)+`|\"[^\"]+\"|[\w$]+)\s+", re.I)
_NOT_COLUMNS = frozenset({"INDEX", "KEY", "UNIQUE", "PRIMARY", "CONSTRAINT", "FOREIGN",
                          "FULLTEXT", "SPATIAL", "CHECK", "PARTITION", "PERIOD", "SYSTEM"})
_NAME_TOKEN = re.compile(r"(`(?:[^`]|``)+`|\"[^\"]+\"|[\w$]+)\s+")


def _unquoted(token: str) -> str:
    return token[1:-1].replace("``", "`") if token[0] in "`\"" else token


def column_clauses(sql: str, verbs: tuple[str, ...] = ("ADD", "MODIFY", "CHANGE")
                   ) -> list[tuple[str, str]]:
    """``(column, definition)`` of each clause of ALTER TABLE ``sql`` that adds
    (``ADD``), redefines (``MODIFY``) or renames and redefines (``CHANGE``: the new name)
    a column, for the ``verbs`` asked for; indexes and constraints are left out."""
    out = []
    for clause in split_clauses(strip_comments(sql)):
        m = _COLUMN_CLAUSE.search(clause)
        if m is None or m.group(1).upper() not in verbs or \
                (m.group(2)[0] not in "`\"" and m.group(2).upper() in _NOT_COLUMNS):
            continue
        rest = clause[m.end():]
        name = m.group(2)
        if m.group(1).upper() == "CHANGE":
            new = _NAME_TOKEN.match(rest)
            if new is None:
                continue
            name, rest = new.group(1), rest[new.end():]
        out.append((_unquoted(name), rest.strip()))
    return out


_NAME = r"(`(?:[^`]|``)+`|\"[^\"]+\"|[\w$]+)"
_RENAME_COLUMN = re.compile(rf"\bRENAME\s+COLUMN\s+{_NAME}\s+TO\s+{_NAME}", re.I)
_CHANGE_COLUMN = re.compile(
    rf"\bCHANGE\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?{_NAME}\s+{_NAME}", re.I)


def renamed_columns(statement: str) -> dict[str, str]:
    """``{new name: old name}`` of the columns ALTER TABLE ``statement`` renames
    (``RENAME COLUMN old TO new``, ``CHANGE old new``)."""
    text = strip_comments(statement)
    renames = {}
    for pattern in (_RENAME_COLUMN, _CHANGE_COLUMN):
        for m in pattern.finditer(text):
            old, new = _unquoted(m.group(1)), _unquoted(m.group(2))
            if old != new:
                renames[new] = old
    return renames


_TOKEN_PATTERN = (r"""\s*(?:(`(?:[^`]|``)*`)|("(?:[^"]|"")*")|('(?:[^'\\]|\\.|'')*')|"""
                  r"""([\w$\u0080-\uffff]+)|(.))""")


@functools.cache
def _token_pattern() -> re.Pattern[str]:
    # Compiled at the first DDL (its character ranges take milliseconds): not at every start.
    return re.compile(_TOKEN_PATTERN, re.S)


def _tokens(sql: str) -> list[tuple[str, str]]:
    """``(kind, text)`` pairs: ``name`` (quoted identifier, unquoted), ``word``, ``str`` or
    ``sym``."""
    out: list[tuple[str, str]] = []
    for m in _token_pattern().finditer(sql):
        backtick, dquote, squote, word, sym = m.groups()
        if backtick is not None:
            out.append(("name", backtick[1:-1].replace("``", "`")))
        elif dquote is not None:
            out.append(("name", dquote[1:-1].replace('""', '"')))
        elif squote is not None:
            out.append(("str", squote))
        elif word is not None:
            out.append(("word", word))
        elif sym is not None and not sym.isspace():
            out.append(("sym", sym))
    return out


class _Reader:
    def __init__(self, tokens: list[tuple[str, str]], default_db: str | None):
        self.tokens = tokens
        self.i = 0
        self.default_db = default_db or None

    def peek(self, k: int = 0) -> str:
        """The next token as a keyword or symbol to compare with (a quoted name never matches
        one: ``CREATE TABLE `IF` `` names a table ``IF``)."""
        j = self.i + k
        if j >= len(self.tokens):
            return ""
        kind, text = self.tokens[j]
        if kind == "word":
            return text.upper()
        return "\0name" if kind == "name" else text

    def accept(self, *words: str) -> bool:
        if self.peek() in words:
            self.i += 1
            return True
        return False

    def skip_words(self, *words: str) -> None:
        while self.accept(*words):
            pass

    def name(self) -> str | None:
        if self.i < len(self.tokens) and self.tokens[self.i][0] in ("name", "word"):
            self.i += 1
            return self.tokens[self.i - 1][1]
        return None

    def table_name(self) -> TableName | None:
        first = self.name()
        if first is None:
            return None
        if self.peek() == ".":
            self.i += 1
            second = self.name()
            if second is not None:
                return TableName(first, second)
        return TableName(self.default_db, first)

    def table_list(self) -> list[TableName]:
        names = []
        while True:
            name = self.table_name()
            if name is None:
                break
            names.append(name)
            if not self.accept(","):
                break
        return names


_DDL_VERBS = {"CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE"}
_DATABASE_OPTIONS = {"DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "ENCRYPTION", "READ",
                     "COMMENT"}


def parse_ddl(sql: str, default_db: str | None = None) -> DdlStatement | None:
    """The DDL in ``sql`` (a QUERY event's statement, ``default_db`` its database), or
    ``None`` when the statement is not DDL (BEGIN, COMMIT, GRANT, SAVEPOINT, ...)."""
    r = _Reader(_tokens(strip_comments(sql)), default_db)
    verb = r.peek()
    if verb not in _DDL_VERBS:
        return None
    r.i += 1
    if verb == "TRUNCATE":
        r.accept("TABLE")
        return DdlStatement("truncate_table", r.table_list()[:1])
    if verb == "RENAME":
        if not r.accept("TABLE", "TABLES"):
            return None  # RENAME USER: account administration, like CREATE USER
        return _rename_tables(r)
    if verb == "CREATE":
        r.skip_words("OR", "REPLACE", "TEMPORARY", "ONLINE", "OFFLINE", "UNIQUE", "FULLTEXT",
                     "SPATIAL", "DEFINER", "SQL", "SECURITY", "ALGORITHM")
    if verb == "ALTER":
        r.skip_words("ONLINE", "OFFLINE", "IGNORE")
    if verb == "DROP":
        r.skip_words("TEMPORARY", "ONLINE", "OFFLINE")
    obj = r.peek()
    if obj == "TABLE" or (verb == "DROP" and obj == "TABLES"):
        r.i += 1
        r.skip_words("IF", "NOT", "EXISTS")
        if verb == "DROP":
            return DdlStatement("drop_table", r.table_list())
        table = r.table_name()
        tables = [table] if table else []
        if verb == "ALTER" and table is not None:
            renamed = _alter_rename_target(r, table)
            if renamed is not None:
                return DdlStatement("alter_table", [table, renamed], [(table, renamed)])
        return DdlStatement(f"{verb.lower()}_table", tables)
    if obj in ("DATABASE", "SCHEMA"):
        r.i += 1
        r.skip_words("IF", "NOT", "EXISTS")
        # ALTER DATABASE may leave the name out: CHARACTER SET ... is then the default one's.
        name = None if verb == "ALTER" and r.peek() in _DATABASE_OPTIONS else r.name()
        return DdlStatement(f"{verb.lower()}_database", database=name or default_db)
    if obj == "INDEX" and verb in ("CREATE", "DROP"):
        r.i += 1
        r.skip_words("IF", "NOT", "EXISTS")
        r.name()
        while r.i < len(r.tokens) and r.peek() != "ON":
            r.i += 1
        if r.accept("ON"):
            table = r.table_name()
            return DdlStatement(f"{verb.lower()}_index", [table] if table else [])
        return DdlStatement(f"{verb.lower()}_index")
    if obj in ("USER", "ROLE", "SERVER", "LOGFILE", "TABLESPACE", "RESOURCE"):
        return None  # account and server administration: no data change
    return DdlStatement("other")


def _rename_tables(r: _Reader) -> DdlStatement:
    renames: list[tuple[TableName, TableName]] = []
    while True:
        old = r.table_name()
        if old is None or not r.accept("TO"):
            break
        new = r.table_name()
        if new is None:
            break
        renames.append((old, new))
        if not r.accept(","):
            break
    tables = [t for pair in renames for t in pair]
    return DdlStatement("rename_table", tables, renames)


def _alter_rename_target(r: _Reader, table: TableName) -> TableName | None:
    """The new name in ``ALTER TABLE t ... RENAME [TO|AS] t2`` (not RENAME COLUMN/INDEX/KEY)."""
    depth = 0
    while r.i < len(r.tokens):
        tok = r.peek()
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth -= 1
        elif tok == "RENAME" and depth == 0:
            r.i += 1
            if r.peek() in ("COLUMN", "INDEX", "KEY"):
                continue
            r.accept("TO", "AS")
            new = r.table_name()
            if new is not None and new.database is None:
                new = TableName(table.database, new.table)
            return new
        r.i += 1
    return None
