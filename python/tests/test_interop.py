"""Python and the C library (the dlock command) on the same locks: each waits
for the other, and both write the same keys (Redisson's layout)."""

import json
import os
import re
import subprocess
import threading
import time

import pytest

import dlock

from conftest import within


class CliHolder:
    """`dlock run ARGS -- sh -c 'echo held; read x'`: holds until release()."""

    def __init__(self, cli, url, *args):
        env = dict(os.environ, DLOCK_URL=url)
        self.p = subprocess.Popen([cli, "run", "--lock-delay", "0"] + list(args) +
                                  ["--", "sh", "-c", "echo held; read x"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env)
        line = self.p.stdout.readline().strip()
        assert line == "held", self.p.stderr.read()

    def release(self):
        self.p.stdin.write("\n")
        self.p.stdin.flush()
        self.p.wait(within(10))
        assert self.p.returncode == 0, self.p.stderr.read()


def cli_waiter(cli, url, *args):
    env = dict(os.environ, DLOCK_URL=url)
    return subprocess.Popen([cli, "run", "-w", "30"] + list(args) + ["--", "echo", "got"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


# Python object for a kind, and the dlock run options taking the same thing
KINDS = {
    "lock": (lambda c, n: c.lock(n), []),
    "fair": (lambda c, n: c.fair_lock(n), ["--fair"]),
    "write": (lambda c, n: c.read_write_lock(n).write, ["--write"]),
    "read-vs-write": (lambda c, n: c.read_write_lock(n).read, ["--write"]),
    "spin": (lambda c, n: c.spin_lock(n), ["--spin"]),
    "spin-vs-lock": (lambda c, n: c.spin_lock(n), []),
    "nonreentrant-vs-lock": (lambda c, n: c.non_reentrant_lock(n), []),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_python_holds_c_waits(kind, client, url, dlock_cli, name):
    make, opts = KINDS[kind]
    l = make(client, name)
    l.acquire()
    w = cli_waiter(dlock_cli, url, *opts, name)
    try:
        time.sleep(0.5)
        assert w.poll() is None                          # the C waiter waits
        t0 = time.monotonic()
        l.release()
        out, err = w.communicate(timeout=within(10))
        assert w.returncode == 0 and out.strip() == "got", err
        assert time.monotonic() - t0 < within(2.0)      # woken, not polled
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_c_holds_python_waits(kind, client, url, dlock_cli, name, r):
    make, opts = KINDS[kind]
    l = make(client, name)
    h = CliHolder(dlock_cli, url, *opts, name)
    assert l.acquire(timeout=0.2) is False
    got = {}

    def wait():
        got["ok"] = l.acquire(timeout=within(10))
        got["at"] = time.monotonic()
        if got["ok"]:
            l.release()
    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    h.release()
    t.join(within(15))
    assert got.get("ok") is True and got["at"] - t0 < within(2.0)
    assert r.exists(name) == 0


def test_permits_and_latch_across(client, url, dlock_cli, name, r):
    p = client.permit_semaphore(name)
    h = CliHolder(dlock_cli, url, "--semaphore", name, "--permits", "1")
    assert p.acquire(timeout=0.2) is None                 # the C holder has the only permit
    threading.Timer(0.2, h.release).start()
    pid = p.acquire(timeout=within(10))
    assert pid is not None
    w = cli_waiter(dlock_cli, url, "--semaphore", name, "--permits", "1")
    time.sleep(0.4)
    assert w.poll() is None
    p.release(pid)
    out, err = w.communicate(timeout=within(10))
    assert w.returncode == 0 and out.strip() == "got", err
    d = client.latch(name + ":latch")
    env = dict(os.environ, DLOCK_URL=url)
    assert subprocess.run([dlock_cli, "latch", "set", name + ":latch", "2"], env=env).returncode == 0
    assert d.count() == 2
    waiter = subprocess.Popen([dlock_cli, "latch", "wait", "-w", "30", name + ":latch"], env=env)
    d.count_down()
    subprocess.run([dlock_cli, "latch", "down", name + ":latch"], env=env, check=True)
    assert waiter.wait(within(10)) == 0 and d.wait(0) is True


def test_rate_limiter_across(client, url, dlock_cli, name, r):
    env = dict(os.environ, DLOCK_URL=url)

    def run(*args):
        return subprocess.run([dlock_cli, "run"] + list(args) + ["--", "true"], env=env,
                              capture_output=True, text=True, timeout=within(20)).returncode
    # dlock run sets an absent limiter; Python reads it and the permit it took
    assert run("--rate", "2/1h", name) == 0
    rl = client.rate_limiter(name)
    assert rl.config() == dlock.RateConfig(2, 3600.0, False, None)
    assert rl.available() == 1
    assert rl.acquire(timeout=0) is True
    assert run("-n", "--rate", "2/1h", name) == 75         # none left: Python's grant counts
    rl.release(1)
    assert run("-n", "--rate", "2/1h", name) == 0           # Python's release too
    assert run("-n", "--rate", "3/1h", name) == 65          # another rate: refused
    # set from Python, taken by dlock run: the same hash as dlock run writes
    from_c = r.hgetall(name)
    assert rl.delete() is True
    assert rl.try_set_rate(2, 3600) is True
    assert r.hgetall(name) == from_c
    assert run("-n", "--rate", "2/1h", name) == 0 and rl.available() == 1


# ----------------------------------------------------------- the layout

OWNER = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:[0-9]+")
PERMIT = re.compile(rb"\b[0-9a-f]{32}\b")


def norm(b):
    return PERMIT.sub(b"<permit>", OWNER.sub(b"<owner>", b))


def layout(r, name):
    """Every key of `name` as Redis holds it, owner ids and permit ids
    replaced: (key, type, content). Left out: the fencing counter's value
    and what only dlock run writes (its note)."""
    out = {}
    for k in r.scan_iter(match="*%s*" % name.replace("[", "\\[").replace("]", "\\]")):
        if b":dlock_note:" in k or k.startswith(b"redisson_unlock_latch"):
            continue
        t = r.type(k).decode()
        if k.startswith(b"redisson_lock_token:"):
            v = "<counter>"
        elif t == "hash":
            v = sorted((norm(f), norm(x)) for f, x in r.hgetall(k).items())
        elif t == "zset":    # a permit's member: its id's 16 bytes
            v = sorted(b"<permit>" if k.endswith(b":timeout") and len(m) == 16 else norm(m)
                       for m in r.zrange(k, 0, -1))
        elif t == "list":
            v = [norm(x) for x in r.lrange(k, 0, -1)]
        else:
            v = norm(r.get(k))
        out[norm(k).decode()] = (t, v)
    return out


LAYOUT = {
    # kind: (take it in Python, dlock run options)
    "lock": (lambda c, n: c.fenced_lock(n).acquire(), []),
    "fair": (lambda c, n: c.fair_lock(n, fenced=True).acquire(), ["--fair"]),
    "read": (lambda c, n: c.read_write_lock(n, fenced=True).read.acquire(), ["--read"]),
    "write": (lambda c, n: c.read_write_lock(n, fenced=True).write.acquire(), ["--write"]),
    "spin": (lambda c, n: c.spin_lock(n, fenced=True).acquire(), ["--spin"]),
    "permits": (lambda c, n: c.permit_semaphore(n).try_set_permits(1) and
                c.permit_semaphore(n).acquire(), ["--semaphore"]),
}


@pytest.mark.parametrize("kind", sorted(LAYOUT))
def test_same_keys_as_the_c_library(kind, url, dlock_cli, name, r):
    import dlock
    take, opts = LAYOUT[kind]
    args = opts + [name] + (["--permits", "1"] if kind == "permits" else [])
    h = CliHolder(dlock_cli, url, *args)
    from_c = layout(r, name)
    h.release()
    for k in r.scan_iter(match="*%s*" % name.replace("[", "\\[").replace("]", "\\]")):
        r.delete(k)
    with dlock.Client(url) as c:
        got = take(c, name)
        from_python = layout(r, name)
        assert from_c and from_python == from_c
        # and the C library reads Python's hold as the holder it is
        env = dict(os.environ, DLOCK_URL=url)
        st = json.loads(subprocess.run([dlock_cli, "status", "--json", name], env=env,
                                       capture_output=True, text=True, check=True).stdout)
        if kind == "permits":
            assert st["kind"] == "permit semaphore" and st["count"] == 0
            assert [h["permit"][:6] for h in st["holders"]] == [got[:6]]
        else:
            assert st["locked"] and c.owner_id in json.dumps(st["holders"])
