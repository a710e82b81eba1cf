"""A finished transaction's changes, numbered and stamped with it, in parts of at most a
given size (from its spill file when it was big)."""

from __future__ import annotations

from collections.abc import Iterator

from changestream.model.changes import Change, Position, TransactionPart
from changestream.transactions.groups import Finished


def transaction_parts(done: Finished, max_changes: int) -> Iterator[TransactionPart]:
    """A finished transaction's changes, numbered and stamped, in parts of at most
    ``max_changes``; the last part is ``complete`` and says where the transaction ends."""
    info, group = done.info, done.group
    assert info is not None and group is not None
    end = Position(done.file, done.end)
    changes = group.changes
    if group.spill is None and len(changes) <= max_changes:
        # The whole transaction in one part (most are): no chunking, no spill file.
        for seq, change in enumerate(changes):
            change.seq = seq
            change.transaction = info
        if changes:
            changes[-1].last = True
        group.changes = []
        yield TransactionPart(info, changes, True, end)
        return
    total = group.size
    seq = 0
    chunks: Iterator[list[Change]]
    if group.spill is not None:
        if changes:
            group.spill.write(changes)
            group.changes = []
        chunks = group.spill.read()
    else:
        chunks = iter([changes])
    try:
        for chunk in chunks:
            for start in range(0, len(chunk), max_changes):
                piece = chunk[start:start + max_changes] if len(chunk) > max_changes \
                    else chunk
                for change in piece:
                    change.seq = seq
                    change.transaction = info
                    seq += 1
                complete = seq == total
                if complete:
                    piece[-1].last = True
                yield TransactionPart(info, piece, complete, end if complete else None)
    finally:
        group.discard()
