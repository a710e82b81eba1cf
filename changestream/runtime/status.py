"""Parts of a router's status (``GET /status``, ``Router.status()``) read from its stats and
its schema history."""

from __future__ import annotations

from typing import Any

from changestream.observe.stats import RouterStats


def stream_status(st: RouterStats) -> dict[str, Any]:
    """Positions, lag and counts since the start (the caller holds ``st.lock``)."""
    delivered = st.delivered
    return {
        "source_position": {"file": st.read_file, "pos": st.read_pos}
        if st.read_file else None,
        "delivered_position": delivered.as_dict() if delivered else None,
        "seconds_behind": st.seconds_behind(),
        "transactions_delivered": st.transactions_delivered,
        "changes_delivered": st.changes_delivered,
        "batches_delivered": st.batches_delivered,
        "batch_retries": st.batch_retries,
        "reconnects": st.reconnects,
        "refills": st.refills,
        "refills_skipped": st.refills_skipped,
        "events_read": st.events_read,
        "worker_segments": st.worker_segments,
    }


def history_status(opener: Any) -> dict[str, Any] | None:
    """The schema history's origin, tables and DDL counts (``None``: no history open)."""
    tracker = opener.tracker if opener is not None else None
    if tracker is None:
        return None
    history = tracker.history
    return {"origin": history.origin, "tables": len(history.current.tables),
            "ddl_applied": history.ddl_applied, "ddl_not_delivered": history.pending}
