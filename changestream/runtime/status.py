"""Parts of a router's status (``GET /status``, ``Router.status()``) read from its stats and
its schema history."""

from __future__ import annotations

from typing import Any

from changestream.observe.stats import RouterStats


def stream_status(st: RouterStats) -> dict[str, Any]:
    """Positions, lag and counts since the start (the caller holds ``st.delivery.lock``:
    the delivered counts and position are of one batch)."""
    read, done, refill = st.reading, st.delivery, st.refill
    delivered = done.delivered
    return {
        "source_position": {"file": read.read_file, "pos": read.read_pos}
        if read.read_file else None,
        "delivered_position": delivered.as_dict() if delivered else None,
        "seconds_behind": read.seconds_behind(),
        "transactions_delivered": done.transactions_delivered,
        "changes_delivered": done.changes_delivered,
        "batches_delivered": done.batches_delivered,
        "batch_retries": done.batch_retries,
        "reconnects": read.reconnects,
        "refills": refill.refills,
        "refills_skipped": refill.refills_skipped,
        "events_read": read.events_read,
        "worker_segments": read.worker_segments,
    }


def history_status(opener: Any) -> dict[str, Any] | None:
    """The schema history's origin, tables and DDL counts (``None``: no history open)."""
    tracker = opener.tracker if opener is not None else None
    if tracker is None:
        return None
    history = tracker.history
    return {"origin": history.origin, "tables": len(history.current.tables),
            "ddl_applied": history.ddl_applied, "ddl_not_delivered": history.pending}
