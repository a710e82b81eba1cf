"""A listener's moves between the servers of a set (``--source mariadb://u@h1,h2``): when
the server read does not answer, once everything read is delivered, to one that has every
delivered GTID, read on from by GTID (see docs/operations.md, Failover to a replica)."""

from __future__ import annotations

import logging
import threading
import time

from changestream.delivery.flow import StoppedError
from changestream.model.changes import Position, binlog_order
from changestream.model.errors import ConnectionLostError
from changestream.observe.stats import DeliveryCounters
from changestream.sources.failover import ServerDemotedError, ServerSet
from changestream.sources.live import StartPosition

log = logging.getLogger("changestream")


class ListenerFailover:
    """The moves of one listener over ``servers``; ``start_gtids``: the GTIDs before the
    first event read."""

    def __init__(self, servers: ServerSet, start_gtids: str | None,
                 delivery: DeliveryCounters, stopping: threading.Event):
        self.servers = servers
        self._checked = time.monotonic()
        self.start_gtids = start_gtids
        self.delivery = delivery  # the Writer actor's: read only
        self.stopping = stopping
        self._gtid_start: StartPosition | None = None  # where reading on another server began
        self._delivered_at_move: Position | None = None

    def resume_at(self, boundary: tuple[str, int] | None) -> StartPosition | None:
        """Where to read on from after a lost connection: the last ``boundary`` read, else
        where reading on another server of the set began (by GTID), else the start."""
        if boundary is not None:
            return StartPosition("file", file=boundary[0], pos=boundary[1])
        return self._gtid_start

    def check_demoted(self) -> None:
        """While caught up, at most every ``servers.check_seconds``: raise
        :class:`ServerDemotedError` when the server read was demoted and another of the set
        is writable (the listener then leaves it, as after a loss)."""
        now = time.monotonic()
        if now - self._checked < self.servers.check_seconds:
            return
        self._checked = now
        why = self.servers.demoted()
        if why is not None:
            raise ServerDemotedError(why)

    def moved_on(self, lost: ConnectionLostError, boundary: tuple[str, int] | None) -> bool:
        """Whether another server of the set is pointed at, to read on from it by GTID (a
        server that lacks what was delivered stops the router: ``NoServerError``);
        ``boundary``: the last transaction boundary read."""
        log.warning("%s; looking for a server of the set to read on from", lost)
        gtids: list[str] = []

        def delivered() -> str:
            if not gtids:
                gtids.append(self._delivered_gtids(boundary))
            return gtids[0]

        try:
            moved = self.servers.after_demotion(delivered) \
                if isinstance(lost, ServerDemotedError) else self.servers.after_loss(delivered)
        except ConnectionLostError as exc:
            log.warning("%s", exc)
            return False
        if moved:
            self._gtid_start = StartPosition("gtid", gtid=delivered())
            self._delivered_at_move = self.delivery.delivered_position()
        return moved

    def _delivered_gtids(self, target: tuple[str, int] | None) -> str:
        """The GTIDs delivered once everything read up to ``target`` (the last boundary
        read) is (what a server taking over must have); waits for the sink."""
        while target is not None:
            done = self.delivery.delivered_position()
            # Positions from before a move name the other server's files: not comparable.
            if done is not None and done != self._delivered_at_move and \
                    binlog_order(done.file, done.pos) >= binlog_order(*target):
                break
            if self.stopping.wait(0.05):
                raise StoppedError
        done = self.delivery.delivered_position()
        if target is None and self._gtid_start is not None:
            return self._gtid_start.gtid or ""
        if done is not None and done.gtid_set is not None:
            return done.gtid_set
        return self.start_gtids or ""
