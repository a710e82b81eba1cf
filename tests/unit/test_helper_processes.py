"""Helper processes (decode workers, backfill jobs): forked from a process with one thread,
which then leaves nothing of its own open in them; new interpreters once it has more."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    """The parent's environment: this checkout importable, output buffered as a pipe's is
    (PYTHONUNBUFFERED would hide what a child writes again of its parent's buffer)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return {**env, "PYTHONPATH": str(ROOT)}


def _parent(body: str, tmp_path: Path, env: dict[str, str] | None = None) -> dict:
    """Run ``body`` as a new one-thread parent process; the JSON it prints last."""
    script = textwrap.dedent("""
        import fcntl, json, os, signal, sys, threading, time
        sys.modules["tests.helper_parent_marker"] = sys
        from changestream.parallel.processes import ForkedProcess, reap, start_python
        """) + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, input="",  # stdin a pipe, not /dev/null
                          env={**_env(), **(env or {}), "LOCK": str(tmp_path / "lease.lock")})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_one_thread_process_forks_a_child_that_holds_none_of_its_files(
        tmp_path: Path) -> None:
    found = _parent("""
        lease = os.open(os.environ["LOCK"], os.O_RDWR | os.O_CREAT)
        fcntl.flock(lease, fcntl.LOCK_EX)
        signal.signal(signal.SIGTERM, lambda *a: None)  # the router's graceful stop
        print("buffered before the fork", end="")
        channel, process = start_python("tests.helper_children", "report", "t")
        info = channel.recv()
        os.close(lease)
        # The lease is free once the parent lets go, though the child still lives.
        other = os.open(os.environ["LOCK"], os.O_RDWR)
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        info["forked"] = isinstance(process, ForkedProcess)
        info["alive"] = process.poll() is None
        channel.close()
        info["status"] = process.wait(10)
        print()
        print(json.dumps(info))
        """, tmp_path)
    assert found["forked"] and found["parent_module"] and found["alive"]
    assert found["ppid"] != found["pid"] and found["status"] == 0
    # stdin, stdout, stderr, the channel, and the fd of /proc/self/fd's own listing
    assert len(found["fds"]) <= 5 and {0, 1, 2, found["channel"]} <= set(found["fds"])
    assert found["stdin"] == "/dev/null" and found["sigterm_default"]


def test_buffered_output_of_the_parent_is_written_once(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        from changestream.parallel.processes import start_python
        sys.stdout.write("once")
        channel, process = start_python("tests.helper_children", "report", "t")
        channel.recv(); channel.close(); process.wait(10)
        """)], cwd=ROOT, capture_output=True, text=True, timeout=60, env=_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout == "once"


def test_a_process_with_another_thread_starts_a_new_interpreter(tmp_path: Path) -> None:
    found = _parent("""
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        channel, process = start_python("tests.helper_children", "report", "t")
        info = channel.recv()
        info["forked"] = isinstance(process, ForkedProcess)
        channel.close()
        info["status"] = process.wait(10)
        print(json.dumps(info))
        """, tmp_path)
    assert not found["forked"] and not found["parent_module"] and found["status"] == 0


def test_the_variable_turns_forking_off(tmp_path: Path) -> None:
    found = _parent("""
        channel, process = start_python("tests.helper_children", "report", "t")
        info = channel.recv()
        info["forked"] = isinstance(process, ForkedProcess)
        channel.close()
        process.wait(10)
        print(json.dumps(info))
        """, tmp_path, {"CHANGESTREAM_SPAWN_HELPERS": "1"})
    assert not found["forked"]


def test_a_forked_child_that_fails_exits_with_status_one_and_closes_its_end(
        tmp_path: Path) -> None:
    found = _parent("""
        channel, process = start_python("tests.helper_children", "fail", "t")
        try:
            channel.recv()
            ended = False
        except (EOFError, OSError):
            ended = True
        print(json.dumps({"ended": ended, "status": process.wait(10),
                          "forked": isinstance(process, ForkedProcess)}))
        """, tmp_path)
    assert found == {"ended": True, "status": 1, "forked": True}


def test_reap_ends_a_forked_child_that_does_not_stop_by_itself(tmp_path: Path) -> None:
    found = _parent("""
        signal.signal(signal.SIGTERM, lambda *a: None)  # the parent's, not the child's
        channel, process = start_python("tests.helper_children", "block", "t")
        assert channel.recv() == "started"
        began = time.monotonic()
        reap([process])
        print(json.dumps({"seconds": time.monotonic() - began, "status": process.poll(),
                          "forked": isinstance(process, ForkedProcess)}))
        """, tmp_path)
    assert found["forked"] and found["status"] == -15 and found["seconds"] < 4


def test_a_child_ended_as_it_starts_never_runs_the_parents_handlers(tmp_path: Path) -> None:
    """reap() right after start_python: the SIGTERM reaches a child that may not have
    dropped the parent's handler yet; held back until it has, it only ends the child."""
    found = _parent("""
        ran = os.environ["LOCK"] + ".handler"
        def graceful(*args):
            with open(ran, "a") as f:
                f.write(f"{os.getpid()}\\n")
        signal.signal(signal.SIGTERM, graceful)
        statuses = []
        for _ in range(30):
            channel, process = start_python("tests.helper_children", "block", "t")
            reap([process])
            statuses.append(process.poll())
            channel.close()
        print(json.dumps({"statuses": sorted(set(statuses)),
                          "handler_ran_in": open(ran).read().split() if os.path.exists(ran)
                          else []}))
        """, tmp_path)
    assert found == {"statuses": [-15], "handler_ran_in": []}


def test_pyarrows_allocator_thread_does_not_keep_a_process_from_forking(
        tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    found = _parent("""
        import pyarrow  # starts jemalloc's background thread
        threads = [open(f"/proc/self/task/{t}/comm").read().strip()
                   for t in os.listdir("/proc/self/task")]
        channel, process = start_python("tests.helper_children", "arrow", "t")
        total = channel.recv()
        channel.close()
        print(json.dumps({"threads": sorted(threads), "total": total,
                          "forked": isinstance(process, ForkedProcess),
                          "status": process.wait(10)}))
        """, tmp_path)
    assert "jemalloc_bg_thd" in found["threads"]
    assert found["forked"] and found["status"] == 0
    assert found["total"] == sum(range(1_000_000))
