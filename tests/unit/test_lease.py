"""The writer's lease of a standby router: acquire, renew, expiry, fencing by epoch."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from changestream.cli.run import EXIT_LEASE_LOST, exit_code
from changestream.delivery.lease import Lease, LeaseLostError, Renewer
from changestream.model.errors import ConfigError
from changestream.runtime.config import load_config
from changestream.runtime.settings import RouterSettings
from changestream.runtime.standby import StandbyRole


def _pair(tmp_path: Path, seconds: float = 0.3) -> tuple[Lease, Lease]:
    path = tmp_path / "position.json.lease"
    return Lease(path, seconds, owner="a"), Lease(path, seconds, owner="b")


def test_the_first_takes_an_absent_lease_with_epoch_1(tmp_path: Path) -> None:
    a, b = _pair(tmp_path)
    assert a.try_acquire()
    assert a.epoch == 1
    state = a.read()
    assert state is not None and (state.owner, state.epoch, state.released) == ("a", 1, False)
    assert not b.try_acquire()  # held, just renewed
    assert b.epoch is None


def test_a_renewed_lease_is_not_taken_and_an_unrenewed_one_is(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, 0.3)
    assert a.try_acquire()
    for _ in range(6):  # 0.6 s in all, renewed every 0.1 s: never unchanged for 0.3 s
        time.sleep(0.1)
        assert a.renew()
        assert not b.try_acquire()
    deadline = time.monotonic() + 2
    while not b.try_acquire():
        assert time.monotonic() < deadline, "an expired lease was not taken over"
        time.sleep(0.02)
    assert b.epoch == 2
    state = b.read()
    assert state is not None and (state.owner, state.epoch) == ("b", 2)


def test_expiry_is_judged_by_the_standbys_own_clock(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, 0.3)
    assert a.try_acquire()
    # renewed_at far in the past (another host's clock): still not taken at first sight.
    data = json.loads(a.path.read_text())
    data["renewed_at"] = 0.0
    a.path.write_text(json.dumps(data))
    assert not b.try_acquire()
    time.sleep(0.35)
    assert b.try_acquire()


def test_a_writer_whose_lease_was_taken_writes_nothing(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, 0.2)
    assert a.try_acquire()
    with a.fenced():
        pass
    time.sleep(0.25)
    assert not b.try_acquire()  # first sight of the lease starts b's clock
    time.sleep(0.25)
    assert b.try_acquire()
    ran = []
    with pytest.raises(LeaseLostError, match=r"taken over \(epoch 2 by b; this router had "
                                             r"epoch 1\)"), a.fenced():
        ran.append(1)
    assert not ran
    assert a.epoch is None
    with pytest.raises(LeaseLostError):
        a.renew()
    b.renew()


def test_a_takeover_waits_for_the_batch_in_progress(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, 0.2)
    assert a.try_acquire()
    b.expired(b.read())
    inside, release = threading.Event(), threading.Event()

    def batch() -> None:
        with a.fenced():
            inside.set()
            release.wait(5)

    writer = threading.Thread(target=batch)
    writer.start()
    inside.wait(5)
    time.sleep(0.3)  # the lease is not renewed for longer than lease_seconds
    taken: list[bool] = []
    standby = threading.Thread(target=lambda: taken.append(b.try_acquire()))
    standby.start()
    time.sleep(0.2)
    assert standby.is_alive(), "the takeover did not wait for the lock"
    release.set()
    writer.join(5)
    standby.join(5)
    # The batch renewed the lease on its way out, before the standby got the lock.
    assert taken == [False]
    assert a.epoch == 1
    with a.fenced():
        pass


def test_a_released_lease_is_taken_at_once(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, 60)
    assert a.try_acquire()
    assert not b.try_acquire()
    a.release()
    assert a.epoch is None
    state = b.read()
    assert state is not None and state.released
    assert b.try_acquire()
    assert b.epoch == 2


def test_release_of_a_lease_already_taken_changes_nothing(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, 0.1)
    assert a.try_acquire()
    b.expired(b.read())
    time.sleep(0.15)
    assert b.try_acquire()
    with pytest.raises(LeaseLostError):
        a.release()
    state = b.read()
    assert state is not None and (state.owner, state.epoch, state.released) == ("b", 2, False)


def test_the_renewer_renews_and_reports_a_lost_lease(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, 0.3)
    assert a.try_acquire()
    lost: list[BaseException] = []
    renewer = Renewer(a, lost.append)
    renewer.start()
    try:
        time.sleep(0.8)
        assert not b.try_acquire(), "the renewer did not keep the lease"
        # Taken over behind its back (as after a freeze longer than the lease).
        with b.locked():
            state = b.read()
            assert state is not None
            b.path.write_text(json.dumps({**state.as_dict(), "owner": "b",
                                          "epoch": state.epoch + 1}))
        deadline = time.monotonic() + 2
        while not lost:
            assert time.monotonic() < deadline, "the renewer did not see the lease taken"
            time.sleep(0.02)
        assert isinstance(lost[0], LeaseLostError)
    finally:
        renewer.stop()


def test_a_lease_file_that_is_not_one_is_a_clear_error(tmp_path: Path) -> None:
    a, _ = _pair(tmp_path)
    a.path.write_text("{not json")
    with pytest.raises(ConfigError, match=r"lease file .*position.json.lease is not a "
                                          r"changestream lease"):
        a.try_acquire()


def test_lease_seconds_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"standby.lease_seconds: must be positive"):
        Lease(tmp_path / "x.lease", 0)
    with pytest.raises(ConfigError, match=r"standby.lease_seconds: must be a positive"):
        load_config(overrides={"standby.lease_seconds": 0, "standby.enabled": True,
                               "start.position_file": str(tmp_path / "p.json")})


def test_standby_needs_a_position_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"standby.enabled: needs start.position_file"):
        load_config(overrides={"standby.enabled": True})
    with pytest.raises(ConfigError, match=r"standby.enabled: needs start.position_file"):
        StandbyRole.of(RouterSettings(source="file:///x", standby=True), lambda e: None,
                       threading.Event())
    config = load_config(overrides={"standby.enabled": True, "standby.lease_seconds": 4,
                                    "start.position_file": str(tmp_path / "p.json")})
    settings = RouterSettings.from_config(config)
    role = StandbyRole.of(settings, lambda e: None, threading.Event())
    assert role is not None
    assert role.lease.path == tmp_path / "p.json.lease"
    assert role.lease.lease_seconds == 4
    assert role.status()["role"] == "standby"


def test_a_standby_stopped_while_waiting_takes_nothing(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, 60)
    assert a.try_acquire()
    stop = threading.Event()
    role = StandbyRole(b, lambda e: None, stop)
    threading.Timer(0.3, stop.set).start()
    assert not role.take()
    assert b.epoch is None


def test_a_lost_lease_exits_5() -> None:
    assert exit_code(LeaseLostError("x")) == EXIT_LEASE_LOST == 5


def test_a_router_stopped_by_another_error_after_losing_its_lease_reports_the_lease(
        tmp_path: Path) -> None:
    a, b = _pair(tmp_path, 0.1)
    role = StandbyRole(a, lambda e: None, threading.Event())
    assert role.take()
    role._renewer.stop()  # type: ignore[union-attr]  # frozen, as it were
    b.expired(b.read())
    time.sleep(0.15)
    assert b.try_acquire()
    reported = role.close(ConnectionError("the server stopped the binlog stream"))
    assert isinstance(reported, LeaseLostError)
    assert role.status()["role"] == "fenced"


def test_a_clean_stop_releases_the_lease(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, 60)
    role = StandbyRole(a, lambda e: None, threading.Event())
    assert role.take() and role.status() == {"role": "writer", "epoch": 1, "owner": "a",
                                             "lease_seconds": 60}
    assert role.close(None) is None
    assert b.try_acquire()


def test_the_renewer_stops_the_writer_on_a_lease_file_that_is_not_one(tmp_path: Path) -> None:
    a, _ = _pair(tmp_path, 0.3)
    assert a.try_acquire()
    lost: list[BaseException] = []
    renewer = Renewer(a, lost.append)
    renewer.start()
    try:
        a.path.write_text("[]")
        deadline = time.monotonic() + 2
        while not lost:
            assert time.monotonic() < deadline, "the renewer did not report the bad lease"
            time.sleep(0.02)
        assert isinstance(lost[0], ConfigError) and "is not a changestream lease" in \
            str(lost[0])
    finally:
        renewer.stop()


def test_a_lease_one_thread_found_taken_is_lost_for_the_release_too(tmp_path: Path) -> None:
    """The writer's fence finds the lease taken first; the stop's release then reports the
    lease lost as well (not nothing to give up), so the router exits as fenced (5) rather
    than with whatever else failed on the way (the source the new writer took over)."""
    path = tmp_path / "position.json.lease"
    first, second = Lease(path, 0.2, owner="a"), Lease(path, 0.2, owner="b")
    assert first.acquire(threading.Event())
    time.sleep(0.3)
    assert second.acquire(threading.Event())
    with pytest.raises(LeaseLostError), first.fenced():
        pass
    with pytest.raises(LeaseLostError, match="epoch 2 by b"):
        first.release()
