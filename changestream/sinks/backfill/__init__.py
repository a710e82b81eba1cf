"""``changestream backfill``: archived binlog files into Iceberg changelog and mirror tables,
decoded in parallel (see :mod:`.driver`)."""

from .driver import BackfillReport, BackfillSettings, run_backfill
from .planning import BackfillUnit, plan_units

__all__ = ["BackfillReport", "BackfillSettings", "BackfillUnit", "plan_units", "run_backfill"]
