"""Threads: mutual exclusion, one owner per thread, waits that release the
GIL, the main thread's waits (through a helper) beside worker threads."""

import threading
import time

import dlock
from conftest import within


def test_threads_take_turns(client, name, r):
    """A read-modify-write in Redis under the lock, from 4 threads: no
    update lost, never two inside at once."""
    counter = name + ":counter"
    inside = [0]
    overlap = []

    def work():
        l = client.lock(name)
        for _ in range(25):
            with l:
                inside[0] += 1
                if inside[0] != 1:
                    overlap.append(inside[0])
                v = int(r.get(counter) or 0)
                time.sleep(0.001)
                r.set(counter, v + 1)
                inside[0] -= 1
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(within(60))
    assert int(r.get(counter)) == 100 and overlap == []


def test_waits_release_the_gil(client, other, name):
    """While a thread waits in dlock, Python code keeps running elsewhere."""
    other.lock(name).acquire()
    done = threading.Event()

    def wait():
        client.lock(name).acquire(timeout=1.0)
        done.set()
    t = threading.Thread(target=wait)
    t.start()
    spins = 0
    t0 = time.monotonic()
    while not done.is_set() and time.monotonic() - t0 < within(5):
        spins += 1                       # a pure-Python loop: needs the GIL
    t.join()
    assert done.is_set() and spins > 10000
    other.lock(name).release()


def test_main_thread_waits_beside_workers(client, name):
    """The main thread's wait runs on a helper thread for the main thread's
    owner: the hold it gets is the main thread's."""
    l = client.lock(name)
    ready = threading.Event()
    release = threading.Event()

    def holder():
        with l:
            ready.set()
            release.wait(within(10))
    t = threading.Thread(target=holder)
    t.start()
    ready.wait(within(5))
    threading.Timer(0.2, release.set).start()
    t0 = time.monotonic()
    assert l.acquire(timeout=within(10))
    assert time.monotonic() - t0 >= 0.15
    t.join()
    owner_here = l.owner
    assert l.held() and l.hold_count == 1
    holds = []
    w = threading.Thread(target=lambda: holds.append((l.held(), l.owner)))
    w.start()
    w.join()
    assert holds == [(False, holds[0][1])] and holds[0][1] != owner_here
    l.release()


def test_many_waiters_all_served(client, name):
    s = client.semaphore(name)
    s.try_set_permits(2)
    got = []
    mu = threading.Lock()

    def take(i):
        sem = client.semaphore(name)
        assert sem.acquire(timeout=within(20))
        with mu:
            got.append(i)
        time.sleep(0.01)
        sem.release()
    ts = [threading.Thread(target=take, args=(i,)) for i in range(12)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(within(30))
    assert sorted(got) == list(range(12)) and s.available() == 2
    assert client.stats()["waits"] > 0


def test_lost_callback_may_query_not_wait(url, name, r):
    """A lost callback runs on the io thread: it may query (and release); a
    wait there is refused (InvalidArgument), close() too; the client goes on."""
    out = {}
    with dlock.Client(url, watchdog=3.0) as c, dlock.Client(url) as blocker:
        blocker.lock(name + ":busy").acquire()

        def lost(ev):
            try:
                c.lock(name + ":busy").acquire(timeout=1)
            except dlock.InvalidArgument as e:
                out["wait"] = str(e)
            try:
                c.close()
            except RuntimeError as e:
                out["close"] = str(e)
            out["locked"] = c.lock(ev.name).locked()
        c.on_lost(lost)
        l = c.lock(name)
        l.acquire()
        r.delete(name)
        t0 = time.monotonic()
        while "locked" not in out and time.monotonic() - t0 < within(5):
            time.sleep(0.02)
        assert out.get("locked") is False and "close" in out and "wait" in out, out
        try:
            l.release()
        except dlock.NotOwnerError:
            pass
        c.ping()
