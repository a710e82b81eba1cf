"""A standby router: of several ``changestream run --standby`` on one job, the one holding
the job's lease writes; the others wait for it (see :mod:`changestream.delivery.lease` and
docs/operations.md#standby-router)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from changestream.delivery.lease import Lease, LeaseLostError, Renewer
from changestream.model.errors import ConfigError

log = logging.getLogger("changestream")

#: The lease file's name beside the position file: ``POSITION_FILE + LEASE_SUFFIX``.
LEASE_SUFFIX = ".lease"


class StandbyRole:
    """This router's part in a pair (or more) sharing a job: ``standby`` until it holds the
    lease, then ``writer``; every batch it makes durable is fenced by the lease."""

    def __init__(self, lease: Lease, on_lost: Callable[[BaseException], None],
                 stopping: threading.Event):
        self.lease = lease
        self.on_lost = on_lost
        self.stopping = stopping
        self.lost: LeaseLostError | None = None
        self.role = "standby"
        self.waited: float | None = None  # seconds waited for the lease
        self._renewer: Renewer | None = None

    @classmethod
    def of(cls, settings: Any, on_lost: Callable[[BaseException], None],
           stopping: threading.Event) -> StandbyRole | None:
        """The role for a router's settings (``None``: no standby, the router just writes)."""
        if not settings.standby:
            return None
        if not settings.position_file:
            raise ConfigError("standby.enabled: needs start.position_file (--position-file); "
                              "the lease is kept beside it")
        return cls(Lease(str(settings.position_file) + LEASE_SUFFIX,
                         settings.lease_seconds), on_lost, stopping)

    def take(self) -> bool:
        """Wait until this router holds the lease (True), or ``stopping`` is set (False);
        then renew it from a thread. Raises the :class:`LeaseLostError` of a lease lost."""
        if self.lost is not None:
            raise self.lost
        if self.lease.epoch is not None:
            return True
        began = time.monotonic()
        state = self.lease.read()
        if state is not None and not state.released:
            log.warning("standby: %s holds the lease %s (epoch %d); waiting to take over",
                        state.owner, self.lease.path, state.epoch)
        if not self.lease.acquire(self.stopping):
            return False
        self.waited = time.monotonic() - began
        self.role = "writer"
        log.warning("standby: took the lease %s (epoch %d) after %.1f s; writing from now on",
                    self.lease.path, self.lease.epoch, self.waited)
        self._renewer = Renewer(self.lease, self._lost)
        self._renewer.start()
        return True

    def _lost(self, exc: BaseException) -> None:
        if isinstance(exc, LeaseLostError):
            self.lost = exc
        self.role = "fenced"
        self.on_lost(exc)  # the router stops, and says why in one line

    def fence(self) -> AbstractContextManager[None]:
        """Around a batch's writing and commit: raises
        :class:`~changestream.delivery.lease.LeaseLostError` when the lease was taken."""
        return self.lease.fenced()

    def close(self, error: BaseException | None) -> BaseException | None:
        """Stop renewing; give the lease up unless it was lost (a standby takes over at
        once). Returns the error to report: ``error``, or the lease lost when it was taken
        over (a writer frozen past its lease may fail otherwise first, e.g. on the
        connection the new writer's took over)."""
        if self._renewer is not None:
            self._renewer.stop()
        if self.role != "standby":
            self.role = "stopped"
        if isinstance(error, LeaseLostError):
            return error
        if self.lost is not None:  # the renewer found it taken (and forgot the epoch)
            return self.lost
        try:
            self.lease.release()
        except LeaseLostError as lost:
            self.role = "fenced"
            return lost
        except OSError as exc:
            log.warning("cannot release the lease %s: %s", self.lease.path, exc)
        return error

    def status(self) -> dict[str, Any]:
        """``role`` (standby, writer, fenced: lost the lease, stopped), the ``epoch``
        held, ``owner``."""
        return {"role": self.role, "epoch": self.lease.epoch, "owner": self.lease.owner,
                "lease_seconds": self.lease.lease_seconds}


def fence(role: StandbyRole | None) -> AbstractContextManager[None]:
    """``role``'s fence, or nothing to hold without a standby."""
    return role.fence() if role is not None else contextlib.nullcontext()


def close_role(role: StandbyRole | None, error: BaseException | None
               ) -> BaseException | None:
    """Close ``role`` if there is one (see :meth:`StandbyRole.close`); the error to
    report."""
    return role.close(error) if role is not None else error
