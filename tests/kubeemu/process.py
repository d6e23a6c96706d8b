"""Run the emulator in a child process (for the benchmark) and drive its ``/_emu`` controls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from .emulator import kubeconfig_text

PROJECT_ROOT = Path(__file__).resolve().parents[2]


class EmulatorProcess:
    """``with EmulatorProcess() as emu:`` starts ``python -m tests.kubeemu`` on a free port.

    The controls are synchronous (urllib), so they can be used from any script; from async
    code wrap them in ``asyncio.to_thread`` if latency matters.
    """

    def __init__(self, *args: str, startup_timeout: float = 15.0) -> None:
        self.args = list(args)
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._tmp = tempfile.TemporaryDirectory(prefix="kubeemu-")

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> EmulatorProcess:
        """Spawn the process and wait for its port file."""
        port_file = Path(self._tmp.name) / "port"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(PROJECT_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.kubeemu", "--port", "0", "--port-file",
             str(port_file), *self.args],
            cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + self.startup_timeout
        while not port_file.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"kubeemu exited with code {self.proc.returncode}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError("kubeemu did not start in time")
            time.sleep(0.02)
        self.port = int(port_file.read_text().strip())
        return self

    def stop(self) -> None:
        """Terminate the process (SIGTERM, then SIGKILL after 5 s)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self._tmp.cleanup()

    def __enter__(self) -> EmulatorProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def write_kubeconfig(self, path: str | os.PathLike[str], namespace: str = "default") -> Path:
        """Write a kubeconfig pointing at the process."""
        out = Path(path)
        out.write_text(kubeconfig_text(self.url, namespace))
        return out

    def control(self, method: str, op: str, body: dict[str, Any] | None = None) -> Any:
        """Call ``/_emu/{op}``; e.g. ``control("POST", "faults", {"path": "binding$",
        "status": 500, "count": 3})``."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.url}/_emu/{op}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as rsp:
            return json.loads(rsp.read() or b"null")

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json") -> Any:
        """A plain API call, e.g. ``request("POST", "/api/v1/nodes", node)``."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                     headers={"Content-Type": content_type})
        with urllib.request.urlopen(req, timeout=60) as rsp:
            return json.loads(rsp.read() or b"null")
