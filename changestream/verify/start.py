"""Whether a router verifies its sink's mirrors on a schedule, and the schedule started when
it does (the schedule's module is imported only then)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pymysql

from changestream.delivery.adapter import SinkAdapter, capabilities_of
from changestream.runtime.settings import RouterSettings


def start_schedule(settings: RouterSettings, sink: SinkAdapter, live: bool,
                   in_scope: Callable[[str, str], bool] | None,
                   connect: Callable[[], pymysql.Connection[Any]]) -> Any:
    """The running :class:`~changestream.verify.schedule.VerifySchedule` the sink's options
    ask for (docs/verify.md), ``None`` when they ask for none or the source is no server."""
    if not capabilities_of(sink).verify_schedule or not live:
        return None
    asked = cast(Any, sink).verify_schedule()
    if asked is None:
        return None
    from changestream.verify.schedule import VerifySchedule

    every, patterns = asked
    schedule = VerifySchedule(settings, cast(Any, sink).verify_target(), every, patterns,
                              in_scope or (lambda d, t: True), connect)
    schedule.start()
    return schedule
