"""Ctrl-C in a wait: SIGINT to a process waiting in dlock raises
KeyboardInterrupt at once, with nothing held and nothing left queued."""

import json
import signal
import subprocess
import sys
import time

import pytest

from conftest import python_env, until, within

CHILD = r"""
import asyncio, json, sys, dlock
kind, url, name = sys.argv[1:4]
c = dlock.Client(url, watchdog=3.0)
objs = {
    "lock": lambda: c.lock(name), "fair": lambda: c.fair_lock(name),
    "write": lambda: c.read_write_lock(name).write,
    "multi": lambda: c.multi_lock([c.lock(name + ":free"), c.lock(name)]),
    "semaphore": lambda: c.semaphore(name), "permit": lambda: c.permit_semaphore(name),
    "latch": lambda: c.latch(name), "election": lambda: c.election(name),
    "async": lambda: c.fair_lock(name),
    "spin": lambda: c.spin_lock(name), "nonreentrant": lambda: c.non_reentrant_lock(name),
    "rate": lambda: c.rate_limiter(name), "permits": lambda: c.permit_semaphore(name),
}
o = objs[kind]()
wait = o.wait if kind == "latch" else o.campaign if kind == "election" else o.acquire
if kind == "permits":
    wait = lambda: o.acquire_many(2)
print("waiting", flush=True)
try:
    if kind == "async":
        asyncio.run(o.acquire_async())
    else:
        wait()
    print(json.dumps({"acquired": True}), flush=True)
    sys.exit(0)
except KeyboardInterrupt:
    held = o.held() if hasattr(o, "held") else None
    print(json.dumps({"interrupted": True, "held": held}), flush=True)
    sys.exit(3)
"""

# what the parent holds so that the child waits, and the channel the child's
# client subscribes to while it waits (None: a fair queue; "": nothing to see
# in Redis, a spin lock's or a rate limiter's waiter sleeps between tries)
SETUP = {
    "lock": ("lock", "redisson_lock__channel:{%s}"),
    "fair": ("fair", None),
    "write": ("read", "redisson_rwlock:{%s}"),
    "multi": ("lock", "redisson_lock__channel:{%s}"),
    "semaphore": ("semaphore", "redisson_sc:{%s}"),
    "permit": ("permit", "redisson_sc:{%s}"),
    "latch": ("latch", "redisson_countdownlatch__channel__{%s}"),
    "election": ("election", "redisson_lock__channel:{%s}"),
    "async": ("fair", None),
    "spin": ("lock", ""),
    "nonreentrant": ("lock", "redisson_lock__channel:{%s}"),
    "rate": ("rate", ""),
    "permits": ("permits", "redisson_sc:{%s}"),
}


def hold(c, what, name):
    """Takes `name` so that a waiter waits; returns what gives it back."""
    if what == "lock":
        l = c.lock(name)
        l.acquire()
        return l.release
    if what == "fair":
        l = c.fair_lock(name)
        l.acquire()
        return l.release
    if what == "read":
        l = c.read_write_lock(name).read
        l.acquire()
        return l.release
    if what == "semaphore":
        s = c.semaphore(name)
        s.set_permits(0)
        return lambda: s.release(1)
    if what in ("permit", "permits"):     # all held; or two, one held: a wait for two waits
        p = c.permit_semaphore(name)
        p.try_set_permits(1 if what == "permit" else 2)
        pid = p.acquire()
        return lambda: p.release(pid)
    if what == "latch":
        d = c.latch(name)
        d.try_set_count(1)
        return d.count_down
    if what == "election":
        e = c.election(name)
        e.campaign()
        return e.resign
    if what == "rate":
        rl = c.rate_limiter(name)
        rl.try_set_rate(1, 3600)
        rl.acquire()
        return lambda: rl.release(1)


@pytest.mark.parametrize("kind", sorted(SETUP))
def test_sigint_in_a_wait(kind, client, url, r, name):
    what, channel = SETUP[kind]
    give_back = hold(client, what, name)
    child = subprocess.Popen([sys.executable, "-c", CHILD, kind, url, name],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=python_env())
    try:
        assert child.stdout.readline().strip() == "waiting", child.stderr.read()
        if channel:       # the child waits: its client listens on the channel
            assert until(lambda: r.pubsub_numsub(channel % name)[0][1] >= 1, 10.0)
        elif channel == "":
            time.sleep(within(0.3))
        else:             # a fair lock's waiter is in its queue
            assert until(lambda: r.llen("redisson_lock_queue:{%s}" % name) == 1, 10.0)
        time.sleep(0.2)   # past priority_after: a reentrant lock's waiter reserves its turn
        t0 = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=within(10))
        took = time.monotonic() - t0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 3, (out, err)
    report = json.loads(out.strip().splitlines()[-1])
    assert report["interrupted"] and report["held"] in (False, None)
    assert took < within(2.0)
    # nothing left queued: the fair queue, its timeouts, a reserved turn
    assert r.llen("redisson_lock_queue:{%s}" % name) == 0
    assert r.zcard("redisson_lock_timeout:{%s}" % name) == 0
    assert r.exists("dlock_lock_next:{%s}" % name) == 0
    give_back()
    # nothing held by the interrupted waiter: once given back, it is all free
    if what in ("lock", "fair", "read"):
        assert until(lambda: r.exists(name) == 0, 2.0)
    elif what == "semaphore":
        assert client.semaphore(name).available() == 1
    elif what == "permit":
        assert client.permit_semaphore(name).available() == 1
    elif what == "permits":
        assert client.permit_semaphore(name).available() == 2
    elif what == "election":
        assert client.election(name).leader().term == 0
    elif what == "rate":
        assert client.rate_limiter(name).available() == 1    # the waiter took nothing
    assert r.exists(name + ":free") == 0


def test_second_sigint_while_giving_up_is_harmless(client, url, r, name):
    release = hold(client, "fair", name)
    child = subprocess.Popen([sys.executable, "-c", CHILD, "fair", url, name],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=python_env())
    try:
        assert child.stdout.readline().strip() == "waiting"
        assert until(lambda: r.llen("redisson_lock_queue:{%s}" % name) == 1, 10.0)
        child.send_signal(signal.SIGINT)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=within(10))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 3, (out, err)
    assert r.llen("redisson_lock_queue:{%s}" % name) == 0
    release()
    assert r.exists(name) == 0
