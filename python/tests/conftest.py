"""Fixtures: throwaway redis-servers on free loopback ports (stopped by pid),
clients, the dlock command of the build tree, and the slack every timing
bound is multiplied by (as tests/cli/lib.sh computes $SLOW).

Run from the source tree: DLOCK_LIBRARY=build/libdlock.so.0
DLOCK_CLI=build/cli/dlock PYTHONPATH=python python3 -m pytest python/tests
(ctest runs them so: python/tests/run.sh)."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
SRC = os.path.dirname(PYDIR)
sys.path.insert(0, PYDIR)

import dlock  # noqa: E402


def _slow():
    base = max(1, int(os.environ.get("DLOCK_TEST_SLOW", "1") or 1))
    try:
        with open("/proc/loadavg") as f:
            fields = f.read().split()
        load = max(float(fields[0]), float(fields[3].split("/")[0]) - 1)
        per_cpu = int(load / (os.cpu_count() or 1) + 0.999)
    except (OSError, ValueError, IndexError):
        per_cpu = 1
    per_cpu = min(max(per_cpu, 1), 4)
    if base > 1:
        per_cpu = 2 if per_cpu > 2 else 1
    return base * per_cpu


SLOW = _slow()


def within(seconds):
    """A timing bound scaled by the machine's slack."""
    return seconds * SLOW


def until(pred, seconds=5.0, step=0.02):
    """Waits until pred() is true, up to seconds (scaled); returns its last value."""
    end = time.monotonic() + within(seconds)
    while True:
        v = pred()
        if v or time.monotonic() > end:
            return v
        time.sleep(step)


class Server:
    """A redis-server on a free loopback port, stopped by pid."""

    def __init__(self, *extra):
        self.dir = tempfile.mkdtemp(prefix="dlock-py-redis-")
        last = None
        for _ in range(20):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", self.dir, "--logfile",
                 os.path.join(self.dir, "redis.log"), "--daemonize", "no"] + list(extra),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.port = port
            self.url = "redis://127.0.0.1:%d" % port
            if until(self._up, 5.0, 0.05):
                return
            last = "redis-server on %d did not answer" % port
            self.stop(keep_dir=True)
        raise RuntimeError(last or "cannot start redis-server")

    def _up(self):
        if self.proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def redis(self):
        import redis
        return redis.Redis(host="127.0.0.1", port=self.port)

    def stop(self, keep_dir=False):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def server():
    s = Server()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def url(server):
    return server.url


@pytest.fixture()
def r(server):
    """redis-py on the same server, to look at the keys."""
    c = server.redis()
    yield c
    c.close()


@pytest.fixture()
def client(url):
    c = dlock.Client(url, watchdog=3.0)
    yield c
    c.close()


@pytest.fixture()
def other(url):
    """A second client: another owner, on the same thread."""
    c = dlock.Client(url, watchdog=3.0)
    yield c
    c.close()


@pytest.fixture()
def name(request):
    """A lock name of this test's own."""
    return "py:" + request.node.name


@pytest.fixture(scope="session")
def dlock_cli():
    path = os.environ.get("DLOCK_CLI") or os.path.join(SRC, "build", "cli", "dlock")
    if not os.access(path, os.X_OK):
        pytest.fail("the dlock command is not built (%s): set DLOCK_CLI" % path)
    return path


def python_env():
    """The environment a child Python needs to import this dlock."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PYDIR + os.pathsep + env.get("PYTHONPATH", "")
    env["DLOCK_LIBRARY"] = dlock.library_path
    return env
