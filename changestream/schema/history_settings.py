"""The ``[schema]`` section: the schema history's settings (docs/schema-history.md)."""

from __future__ import annotations

from changestream.model.modes import HISTORY_MODES, HistoryMode
from changestream.model.record import record
from changestream.model.setting import check_section, setting


def _file_positions(value: list[str]) -> str | None:
    for where in value:
        file, sep, pos = where.rpartition(":")
        if not sep or not file or not pos.isdigit():
            return (f"{where!r} is not FILE:POS (as the error that stopped the router "
                    "printed it)")
    return None


def _history_mode(value: str) -> str | None:
    return None if value in HISTORY_MODES else \
        f"{value!r} is not one of {', '.join(HISTORY_MODES)}"


@record
class HistorySettings:
    """The ``[schema]`` section: the schema history (docs/schema-history.md)."""

    history: HistoryMode = setting("auto", check=_history_mode, doc=(
        "The schema history: every table's definition at each binlog position, for "
        "rows whose TABLE_MAP carries no column names (binlog_row_metadata=MINIMAL). "
        'See docs/schema-history.md. "auto": kept once such rows are met (or '
        'restored when the saved position names one); "on": kept from the start; '
        '"off": none (names from information_schema as it is now).'))
    shadow_server: str = setting("", doc=(
        "The command that runs the shadow server's program (the program last; what "
        'comes before it, e.g. a dynamic loader, is kept). "": the host\'s mariadbd '
        "or mysqld, found on the PATH."))
    shadow_dir: str = setting("", doc=(
        "Where the shadow server keeps its files (a folder per router process). "
        '"": beside start.position_file (its name + ".shadow"), else a temporary '
        "folder."))
    skip: list[str] = setting(factory=list, check=_file_positions, doc=(
        "DDL statements to leave out of the history, as FILE:POS (what the error "
        "that stopped the router names). Beside a position file, `changestream "
        "schema skip` does the same."))

    def __post_init__(self) -> None:
        check_section(self, "schema.")  # made by a program: the configuration's checks
