"""A private Spark standalone cluster for the tests and benches: one master and workers
started from PySpark's own ``bin/spark-class`` on 127.0.0.1, each its own JVM, as on a
real cluster (executors in other processes than the driver, tasks and the Iceberg jar
shipped to them). The warehouse they share is a local folder, which every executor of
this machine reaches.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["StandaloneCluster", "spark_home"]


def spark_home() -> Path:
    """The installed PySpark package: it holds Spark's jars and ``bin/spark-class``."""
    import pyspark

    return Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class StandaloneCluster:
    """``workers`` workers of ``cores`` cores and ``memory`` each; :attr:`master_url` is
    what a driver's ``master`` is set to. Use as a context manager."""

    workers: int = 2
    cores: int = 1
    memory: str = "2g"
    start_timeout: float = 90.0
    master_url: str = ""
    folder: Path = field(default_factory=lambda: Path(
        tempfile.mkdtemp(prefix="changestream-spark-cluster-")))
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __enter__(self) -> StandaloneCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_LOG_DIR=str(self.folder / "logs"),
                   SPARK_WORKER_DIR=str(self.folder / "work"),
                   PYSPARK_PYTHON=env.get("PYSPARK_PYTHON", sys.executable))
        return env

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.folder / f"{name}.log").open("wb")
        process = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args], env=self._env(),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        self._processes.append(process)
        return process

    def log(self, name: str) -> str:
        """What a cluster process (``master``, ``worker-1`` ...) printed."""
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self) -> None:
        """Start the master and the workers; return once every worker has registered."""
        if shutil.which("java") is None:
            raise RuntimeError("no java: a Spark cluster needs a JRE")
        port = _free_port()
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host",
                    "127.0.0.1", "--port", str(port), "--webui-port", str(_free_port()))
        self.master_url = f"spark://127.0.0.1:{port}"
        for i in range(1, self.workers + 1):
            self._spawn(f"worker-{i}", "org.apache.spark.deploy.worker.Worker",
                        "--host", "127.0.0.1", "--cores", str(self.cores), "--memory",
                        self.memory, "--webui-port", str(_free_port()), self.master_url)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            # A worker's own log says it is registered: the master logs "Registering
            # worker" also while it is still in standby, where it ignores the worker (which
            # tries again some 10 s later) and an application then gets no executor.
            registered = sum("Successfully registered with master" in self.log(f"worker-{i}")
                             for i in range(1, self.workers + 1))
            if registered >= self.workers:
                return
            for process in self._processes:
                if process.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"a Spark cluster process ended at start:\n"
                                       f"{self.log('master')[-3000:]}")
            time.sleep(0.2)
        logs = self.log("master")[-3000:]
        self.stop()
        raise RuntimeError(f"the Spark cluster's workers did not register in "
                           f"{self.start_timeout:.0f}s:\n{logs}")

    def stop(self) -> None:
        """Stop every process of the cluster and remove its folder."""
        for process in reversed(self._processes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, 15)
        for process in self._processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait(5)
        self._processes.clear()
        shutil.rmtree(self.folder, ignore_errors=True)
