"""`python -m cli worker` as a subprocess with its output in a log file (for tests that kill workers)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

DAGENT_CMD = [sys.executable, "-m", "durable_agent.cli"]  # the `dagent` script, in this interpreter


class WorkerProcess:
    def __init__(self, env: dict[str, str], log_path: Path, *args: str) -> None:
        self.log_path = log_path
        self.ready_file = log_path.with_suffix(".ready")  # written by the worker once the server sees it poll
        env = {**env, "DAGENT_READY_FILE": str(self.ready_file),
               "PYTHONPATH": os.pathsep.join(p for p in [str(REPO_ROOT), env.get("PYTHONPATH", "")] if p)}
        self._log = open(log_path, "wb")  # closed in kill()
        self.proc = subprocess.Popen([*DAGENT_CMD, "worker", *args], env=env, cwd=REPO_ROOT,
                                     stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"worker exited with {self.proc.returncode}:\n{self.log()}")
        return self.ready_file.exists()  # workers/readiness.py: the server lists this worker as a poller

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self._log.close()
