"""The modes settings take, as types (a checker knows the values) and as the tuples of their
values (what an error lists): one place for each."""

from __future__ import annotations

from typing import Literal, get_args

SnapshotMode = Literal["initial", "when-needed", "initial-only", "never"]
HistoryMode = Literal["auto", "on", "off"]
TlsMode = Literal["preferred", "disabled", "required", "verify-ca", "verify-identity"]
RecordFormat = Literal["changestream", "original"]
Until = Literal["", "caught-up"]
LogLevel = Literal["debug", "info", "warning", "error"]

SNAPSHOT_MODES: tuple[SnapshotMode, ...] = get_args(SnapshotMode)
HISTORY_MODES: tuple[HistoryMode, ...] = get_args(HistoryMode)
TLS_MODES: tuple[TlsMode, ...] = get_args(TlsMode)
FORMATS: tuple[RecordFormat, ...] = get_args(RecordFormat)
LOG_LEVELS: tuple[LogLevel, ...] = get_args(LogLevel)
