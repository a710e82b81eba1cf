"""The ``[batch]`` section, which is the Sink actor's settings: when a micro-batch is cut
and how a failed one is retried."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from changestream.delivery.adapter import capabilities_of
from changestream.model.record import record
from changestream.model.setting import not_negative, positive_seconds, setting

DEFAULT_BATCH_CHANGES = 10_000
DEFAULT_BATCH_BYTES = 16 << 20


def _positive_or_default(value: int) -> str | None:
    return None if value >= 0 else \
        f"must be positive (or 0: the sink's default), got {value}"


@record
class BatchSettings:
    """The ``[batch]`` section: when a micro-batch is cut (whichever comes first) and how a
    failed one is retried. ``max_changes`` 0: the sink adapter's ``batch_changes`` if it
    has one, else ``DEFAULT_BATCH_CHANGES``; ``max_bytes`` 0 likewise its ``batch_bytes``,
    else ``DEFAULT_BATCH_BYTES`` (see :meth:`for_sink`)."""

    max_changes: int = setting(0, check=_positive_or_default, doc=(
        "Batches are written one at a time while the next fills. The next goes to "
        "the sink once the sink is free and it holds a tenth of max_changes or "
        "max_bytes (an idle sink is not kept waiting for a full batch while a "
        "backlog is read), is max_seconds old, or the reader has caught up with its "
        "source (so at a low rate a change does not wait for the timer); under load "
        "a batch holds what came while the last was written, up to max_changes / "
        "max_bytes, where the reader waits for the sink. A position with no changes "
        "(transactions the filter leaves out, a new binlog file) is saved once it is "
        "max_seconds old, not for each such transaction. max_changes 0: the sink's "
        "default, 10,000 changes; the Spark sink's is 250,000, as each Spark write "
        "has a fixed cost:"))
    max_bytes: int = setting(0, check=_positive_or_default, doc=(
        "The changes' size (their Arrow frames' bytes, or an estimate of a change "
        "object's) at which a batch is cut. 0: the sink's default, 16 MB; the "
        "Spark sink's is 64 MB:"))
    max_seconds: float = setting(1.0, check=positive_seconds)
    retries: int = setting(5, check=not_negative, doc=(
        "A batch the sink fails to write is retried this often, the wait doubling "
        "from:"))
    retry_backoff_seconds: float = setting(0.5)

    def for_sink(self, adapter: Any) -> BatchSettings:
        """These settings with ``max_changes`` and ``max_bytes`` set: as given, else the
        adapter's own, else the defaults."""
        if self.max_changes and self.max_bytes:
            return self
        capabilities = capabilities_of(adapter)
        return replace(
            self,
            max_changes=self.max_changes or capabilities.batch_changes or DEFAULT_BATCH_CHANGES,
            max_bytes=self.max_bytes or capabilities.batch_bytes or DEFAULT_BATCH_BYTES)
