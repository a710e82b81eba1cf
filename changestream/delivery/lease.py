"""The writer's lease on a job: which of several routers on the same sink and position
store may write, and the fence that keeps any other from writing.

Two files beside the job's durable state (the position file): ``NAME.lease``, JSON
``{"owner", "epoch", "renewed_at", "released"}`` replaced atomically, and ``NAME.lease.lock``,
only ever locked (``fcntl.flock``, exclusive). Every change of the lease and every batch a
writer makes durable happen under the lock (:meth:`Lease.fenced`), and a writer checks there
that the lease's epoch is still its own: one whose lease was taken over writes nothing more.

Whether a lease has expired is judged by the standby's own monotonic clock: a lease whose
content has not changed for ``lease_seconds`` since the standby first read it (absent or
released: at once). The hosts' wall clocks are never compared; ``renewed_at`` is for people.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from changestream.model.errors import ChangestreamError, ConfigError
from changestream.model.record import record

log = logging.getLogger("changestream")


class LeaseLostError(ChangestreamError):
    """Another router took this job's lease over: this one must not write any more."""


@record(frozen=True)
class LeaseState:
    """What the lease file says (``released``: its holder stopped cleanly and gave it up)."""

    owner: str
    epoch: int
    renewed_at: float
    released: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"owner": self.owner, "epoch": self.epoch, "renewed_at": self.renewed_at,
                "released": self.released}


def new_owner() -> str:
    """An owner name unique to this process: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


class Lease:
    """One router's view of a job's lease at ``path`` (the lock file is ``path + ".lock"``).

    ``epoch`` is the epoch this router took (``None``: it does not hold the lease)."""

    def __init__(self, path: str | os.PathLike[str], lease_seconds: float,
                 owner: str | None = None):
        if not lease_seconds > 0:
            raise ConfigError(f"standby.lease_seconds: must be positive, got {lease_seconds}")
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.lease_seconds = lease_seconds
        self.owner = owner or new_owner()
        self.epoch: int | None = None
        # Why this router holds the lease no more, once any of its threads found it taken.
        self.lost: LeaseLostError | None = None
        self.renewed = 0.0  # monotonic time of this holder's last write of the lease
        self._seen: tuple[LeaseState | None, float] | None = None  # (state, first seen)
        self._thread_lock = threading.Lock()  # one thread of this process at a time

    # -- reading and writing ---------------------------------------------------------------

    def read(self) -> LeaseState | None:
        """The lease file's content (``None``: there is none yet)."""
        try:
            text = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ConfigError(f"lease file {self.path}: cannot read it: {exc.strerror}") \
                from None
        try:
            data = json.loads(text)
            return LeaseState(str(data["owner"]), int(data["epoch"]),
                              float(data["renewed_at"]), bool(data.get("released", False)))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"lease file {self.path} is not a changestream lease ({exc}); "
                              "remove it when no router runs") from None

    def _write(self, state: LeaseState, durable: bool) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{self.owner.replace(':', '-')}.tmp")
        with open(tmp, "w") as f:
            json.dump(state.as_dict(), f)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, self.path)
        if durable:
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        self.renewed = time.monotonic()

    @contextlib.contextmanager
    def locked(self, stop: threading.Event | None = None) -> Iterator[bool]:
        """Hold the lock file's exclusive lock (yields False when ``stop`` was set while
        waiting for it, without holding it). Polls, so that a stop is not held up."""
        with self._thread_lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if stop is not None and stop.wait(0.05):
                            yield False
                            return
                        if stop is None:
                            time.sleep(0.05)
                try:
                    yield True
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    # -- the standby -----------------------------------------------------------------------

    def expired(self, state: LeaseState | None) -> bool:
        """Whether ``state`` may be taken over: absent, released, or unchanged for
        ``lease_seconds`` since this router first read it."""
        if state is None or state.released:
            return True
        now = time.monotonic()
        if self._seen is None or self._seen[0] != state:
            self._seen = (state, now)
        return now - self._seen[1] >= self.lease_seconds

    def try_acquire(self, stop: threading.Event | None = None) -> bool:
        """Take the lease when it may be taken over (see :meth:`expired`), with the next
        epoch; True when this router holds it now."""
        if not self.expired(self.read()):
            return False
        with self.locked(stop) as held:
            if not held:
                return False
            state = self.read()  # again, under the lock: it may have been renewed
            if not self.expired(state):
                return False
            epoch = (state.epoch if state is not None else 0) + 1
            self._write(LeaseState(self.owner, epoch, time.time()), durable=True)
            self.epoch, self.lost = epoch, None
            self._seen = None
            return True

    def acquire(self, stop: threading.Event, poll: float = 0.25) -> bool:
        """Wait until this router holds the lease (True) or ``stop`` is set (False)."""
        while not stop.is_set():
            if self.try_acquire(stop):
                return True
            stop.wait(poll)
        return False

    # -- the writer ------------------------------------------------------------------------

    def _check(self) -> LeaseState:
        """Under the lock: the lease, which must still be this router's epoch."""
        state = self.read()
        if self.epoch is None or state is None or state.epoch != self.epoch or \
                state.owner != self.owner or state.released:
            held = f"epoch {state.epoch} by {state.owner}" if state is not None else "nobody"
            mine = self.epoch
            self.epoch = None
            if mine is None and self.lost is not None:
                raise self.lost
            self.lost = LeaseLostError(
                f"the lease {self.path} was taken over ({held}; this router had epoch "
                f"{mine}): another router writes this job now; this one stops without "
                "writing")
            raise self.lost
        return state

    @contextlib.contextmanager
    def fenced(self) -> Iterator[None]:
        """Hold the lock while the lease is still this router's (else raise
        :class:`LeaseLostError` without running the block); renew it on the way out when
        a third of ``lease_seconds`` has passed, before anyone else can take the lock."""
        with self.locked():
            self._check()
            try:
                yield
            finally:
                if time.monotonic() - self.renewed >= self.lease_seconds / 3:
                    try:
                        self._renew_locked()
                    except OSError as exc:  # the renewer tries again; fencing holds
                        log.warning("cannot renew the lease %s: %s", self.path, exc)

    def _renew_locked(self) -> None:
        assert self.epoch is not None
        self._write(LeaseState(self.owner, self.epoch, time.time()), durable=False)

    def renew(self) -> bool:
        """Write a new ``renewed_at`` when the lease is still this router's; raise
        :class:`LeaseLostError` when it was taken over. False when the lock was busy
        (a batch being written renews it when it is done)."""
        fd = None
        if not self._thread_lock.acquire(blocking=False):
            return False
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            try:
                self._check()
                self._renew_locked()
                return True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            if fd is not None:
                os.close(fd)
            self._thread_lock.release()

    def release(self) -> None:
        """Give the lease up (a clean stop): a standby takes it over at once. Raises
        :class:`LeaseLostError` when it was taken over already (nothing to give up), also
        when another of this router's threads found that first."""
        if self.epoch is None:
            if self.lost is not None:
                raise self.lost
            return
        with self.locked():
            self._check()
            assert self.epoch is not None
            self._write(LeaseState(self.owner, self.epoch, time.time(), released=True),
                        durable=True)
            self.epoch = None


class Renewer:
    """A thread renewing ``lease`` every third of its ``lease_seconds``; when the lease
    was taken over it calls ``on_lost`` with the error and ends."""

    def __init__(self, lease: Lease, on_lost: Callable[[BaseException], None]):
        self.lease = lease
        self.on_lost = on_lost
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="changestream-lease")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(5)

    def _run(self) -> None:
        period = self.lease.lease_seconds / 3
        while not self._stop.wait(max(0.05, min(period / 4, 1.0))):
            if time.monotonic() - self.lease.renewed < period:
                continue
            try:
                self.lease.renew()
            except ChangestreamError as exc:  # taken over, or a lease file not a lease
                self.on_lost(exc)
                return
            except OSError as exc:  # the storage failing: the lease may expire; fencing holds
                log.warning("cannot renew the lease %s: %s", self.lease.path, exc)
