"""Every type through the binding, on a real redis-server: what a user checks."""

import builtins
import gc
import logging
import math
import os
import re
import threading
import time
import zlib

import pytest

import dlock
from conftest import SRC, Server, until, within


def in_thread(fn, *args):
    """fn(*args) on another thread (another owner); its result or exception."""
    out = {}

    def run():
        try:
            out["v"] = fn(*args)
        except BaseException as e:
            out["e"] = e
    t = threading.Thread(target=run)
    t.start()
    t.join(within(30))
    assert not t.is_alive()
    if "e" in out:
        raise out["e"]
    return out["v"]


def test_lock_reentrant_held_released(client, name, r):
    l = client.lock(name)
    assert not l.locked() and not l.held() and l.hold_count == 0 and l.ttl is None
    assert l.acquire() is True
    assert l.acquire(timeout=0) is True              # reentrant
    assert l.held() and l.locked() and l.hold_count == 2
    assert 2.0 < l.ttl <= 3.0                        # watchdog=3.0 seconds
    owner = l.owner
    assert r.hgetall(name) == {owner.encode(): b"2"}  # Redisson's hash: owner -> count
    l.release()
    assert l.hold_count == 1
    l.release()
    assert not l.locked() and r.exists(name) == 0
    with pytest.raises(dlock.NotOwnerError) as ei:
        l.release()
    assert isinstance(ei.value, RuntimeError)        # as threading.Lock.release
    assert ei.value.errname == "DLOCK_ENOTOWNER" and ei.value.code == -4
    assert name in str(ei.value)


def test_with_statement(client, name):
    l = client.lock(name)
    with l as got:
        assert got is l and l.held()
    assert not l.locked()
    with pytest.raises(ZeroDivisionError):           # the block's error wins; released
        with l:
            1 / 0
    assert not l.locked()


def test_timeout_blocking_lease_in_seconds(client, other, name, r):
    l = client.lock(name)
    assert other.lock(name).acquire()                # another owner holds it
    t0 = time.monotonic()
    assert l.acquire(timeout=0.3) is False
    took = time.monotonic() - t0
    assert 0.29 <= took < 0.3 + within(1.0)
    assert l.acquire(blocking=False) is False
    with pytest.raises(ValueError):
        l.acquire(blocking=False, timeout=1)
    with pytest.raises(dlock.InvalidArgument):
        l.acquire(timeout=-2)
    other.lock(name).release()
    assert l.acquire(lease=0.6)
    assert 0 < r.pttl(name) <= 600
    assert until(lambda: r.exists(name) == 0, 3.0)  # the lease ends it: never renewed
    with pytest.raises(dlock.NotOwnerError):
        l.release()
    with pytest.raises(dlock.InvalidArgument):
        l.acquire(lease=0)


def test_default_lease_and_extend(client, name, r):
    l = client.lock(name, lease=2.0)
    with l:
        assert 1000 < r.pttl(name) <= 2000
        l.extend(10)
        assert 9000 < r.pttl(name) <= 10000
    w = client.lock(name)
    with w, pytest.raises(dlock.InvalidArgument):
        w.extend(5)                                   # a watchdog hold cannot be leased


def test_another_thread_is_another_owner(client, name):
    l = client.lock(name)
    with l:
        assert in_thread(l.held) is False
        assert in_thread(lambda: l.acquire(timeout=0.1)) is False
        with pytest.raises(dlock.NotOwnerError):
            in_thread(l.release)
        assert l.held()


def test_fair_lock_turns_in_arrival_order(client, name, r):
    f = client.fair_lock(name)
    got = []
    f.acquire()
    threads = []
    for i in range(3):
        def wait(i=i):
            with client.fair_lock(name):
                got.append(i)
        t = threading.Thread(target=wait)
        t.start()
        threads.append(t)
        assert until(lambda: r.llen("redisson_lock_queue:{%s}" % name) == i + 1)  # queued
    f.release()
    for t in threads:
        t.join(within(20))
    assert got == [0, 1, 2]


def test_fenced_lock_tokens_grow(client, name, r):
    f = client.fenced_lock(name)
    assert f.token is None
    tokens = []
    for _ in range(3):
        with f:
            tokens.append(f.token)
            assert f.last_token() == f.token
    assert tokens == sorted(tokens) and len(set(tokens)) == 3
    assert int(r.get("redisson_lock_token:{%s}" % name)) == tokens[-1]
    with f:   # a fenced write: the older token is refused once a newer one wrote
        client.fence_set(f.token, name + ":data", "new")
    with pytest.raises(dlock.FencedError):
        client.fence_set(tokens[0], name + ":data", "stale")
    assert r.get(name + ":data") == b"new"
    assert client.fence_guard(name + ":data") == f.token


def test_read_write_lock(client, name, r):
    rw = client.read_write_lock(name)
    with rw.read:
        assert in_thread(lambda: rw.read.acquire(timeout=0))        # readers share
        assert in_thread(lambda: rw.write.acquire(timeout=0.1)) is False
        with pytest.raises(dlock.DeadlockError) as ei:               # a reader asks to write
            rw.write.acquire(timeout=0)
        assert isinstance(ei.value, RuntimeError)
        assert r.hget(name, "mode") == b"read"
    assert rw.read.locked()                                          # the thread's read hold
    with pytest.raises(dlock.NotOwnerError):
        rw.read.release()                                            # not this thread's
    rw.read.force_release()
    with rw.write:
        assert r.hget(name, "mode") == b"write"
        assert in_thread(lambda: rw.read.acquire(timeout=0.1)) is False
        with rw.read:                                                # a writer may read
            assert rw.read.held()
    assert not rw.write.locked()


def test_semaphore(client, name, r):
    s = client.semaphore(name)
    assert s.try_set_permits(3) is True
    assert s.try_set_permits(5) is False
    assert s.acquire(2) is True
    assert s.available() == 1 and r.get(name) == b"1"
    t0 = time.monotonic()
    assert s.acquire(2, timeout=0.2) is False
    assert time.monotonic() - t0 >= 0.19
    threading.Timer(0.2, s.release, (2,)).start()
    assert s.acquire(3, timeout=within(5)) is True                  # woken by the release
    s.release(3)
    with s:
        assert s.available() == 2
    assert s.drain() == 3 and s.available() == 0
    s.add_permits(1)
    assert s.available() == 1
    with pytest.raises(dlock.InvalidArgument):
        s.acquire(0)
    assert s.delete() is True


def test_semaphore_ttl_expire_release_if_exists(client, name, r):
    s = client.semaphore(name)
    assert s.ttl is None and s.release_if_exists(1) is False and r.exists(name) == 0
    assert s.try_set_permits(2, ttl=30) is True
    assert 29 < s.ttl <= 30 and 0 < r.pttl(name) <= 30000
    assert s.release_if_exists(1) is True and s.available() == 3
    assert s.expire(None) is True and s.ttl == math.inf and r.pttl(name) == -1
    assert s.expire(5) is True and 4 < s.ttl <= 5
    with pytest.raises(dlock.InvalidArgument):
        s.expire(0)
    p = client.permit_semaphore(name + ":p")
    assert p.ttl is None and p.expire(5) is False
    p.try_set_permits(2)
    pid = p.acquire()
    assert p.total() == 2 and p.available() == 1
    assert p.expire(10) is True and 9 < p.ttl <= 10
    assert p.force_release(pid) is True and p.force_release(pid) is False
    assert p.available() == 2
    with pytest.raises(dlock.NotOwnerError):
        p.release(pid)                            # no longer held by its taker


def test_inspect(client, other, name, r):
    assert client.inspect(name).kind == "none"
    f = client.fair_lock(name, fenced=True)
    with f:
        t = threading.Thread(target=lambda: other.fair_lock(name).acquire(timeout=within(10))
                             and other.fair_lock(name).release())
        t.start()
        assert until(lambda: r.llen("redisson_lock_queue:{%s}" % name) == 1)
        i = f.inspect()
        by_name = client.inspect(name)              # the same, by name
        assert (by_name.holders, by_name.queued[0].owner) == (i.holders, i.queued[0].owner)
        assert i.name == name and i.kind == "lock" and i.locked and i.holders_total == 1
        assert i.holders[0].owner == f.owner and i.holders[0].count == 1
        assert i.holders[0].ttl is None and i.holders[0].writes is False
        assert 0 < i.ttl <= 3.0 and i.token == f.token and i.token > 0
        assert len(i.queued) == 1 and i.queued[0].owner != f.owner and i.queued[0].deadline > 0
        assert i.waiters >= 1 and i.mode is None
    t.join(within(10))
    rw = client.read_write_lock(name + ":rw")
    with rw.write:
        i = client.inspect(name + ":rw")
        assert i.kind == "rwlock" and i.mode == "write" and i.holders[0].writes is True
    p = client.permit_semaphore(name + ":p")
    p.try_set_permits(2)
    pid = p.acquire(lease=20)
    i = client.inspect(name + ":p")
    assert i.kind == "permits" and i.count == 1 and [h.owner for h in i.holders] == [pid]
    assert 19 < i.holders[0].ttl <= 20
    client.semaphore(name + ":s").try_set_permits(4)
    assert client.inspect(name + ":s")[:2] == (name + ":s", "count")
    assert client.inspect(name + ":s").count == 4
    r.rpush(name + ":list", "x")
    i = client.inspect(name + ":list")
    assert i.kind == "other" and i.redis_type == "list" and i.ttl == math.inf
    with pytest.raises(dlock.WrongTypeError):
        client.lock(name + ":list").inspect()


def test_held_by_an_owner_id(client, other, name):
    l = client.lock(name)
    with l:
        assert l.held_by(l.owner) and other.lock(name).held_by(l.owner)
        assert not l.held_by(other.owner_id) and not l.held_by(client.new_owner_id())
        assert in_thread(lambda: l.held_by(l.owner)) is False   # l.owner: that thread's
    assert not other.lock(name).held_by(l.owner)


def test_permit_semaphore(client, name, r):
    p = client.permit_semaphore(name)
    assert p.try_set_permits(2)
    a = p.acquire()                                  # watchdog permit
    b = p.acquire(lease=0.5)
    assert len(a) == 32 and all(ch in "0123456789abcdef" for ch in a) and a != b
    assert p.available() == 0 and p.acquired() == 2
    assert p.acquire(timeout=0.1) is None
    assert 0 < p.lease_time(b) <= 0.5
    c = p.acquire(timeout=within(5), lease=10)       # b's lease ends: its permit comes back
    assert c is not None
    with pytest.raises(dlock.NotOwnerError):
        p.release(b)                                 # expired
    assert p.try_release(b) is False
    p.update_lease(c, 30)
    assert 29 < p.lease_time(c) <= 30
    p.release(a)
    p.release(c)
    assert p.available() == 2
    with pytest.raises(dlock.InvalidArgument):
        p.release("not-an-id")


def test_permit_without_expiry(client, other, name, r):
    """dlock.NO_EXPIRY (Redisson's leaseTime -1): Redisson's score, lease
    time inf, outlives its client, never renewed; any other negative lease
    refused."""
    p = client.permit_semaphore(name)
    assert p.try_set_permits(3)
    a = other.permit_semaphore(name).acquire(lease=dlock.NO_EXPIRY)
    assert r.zscore("{%s}:timeout" % name, bytes.fromhex(a)) == 922337203685477
    assert p.lease_time(a) == math.inf
    many = p.acquire_many(2, lease=dlock.NO_EXPIRY)
    assert all(p.lease_time(i) == math.inf for i in many) and p.available() == 0
    with pytest.raises(dlock.InvalidArgument):
        p.acquire(timeout=0, lease=-1)
    with pytest.raises(dlock.InvalidArgument):
        p.update_lease(a, dlock.NO_EXPIRY)           # only acquisitions take it
    p.release(a)
    p.release_many(many)
    assert p.available() == 3 and p.acquired() == 0


def test_permit_semaphore_many(client, other, name, r):
    p = client.permit_semaphore(name)
    assert p.try_set_permits(3)
    ids = p.acquire_many(2, lease=30)                 # all or none, one lease
    assert len(ids) == 2 and len(set(ids)) == 2 and all(len(i) == 32 for i in ids)
    assert p.available() == 1 and all(29 < p.lease_time(i) <= 30 for i in ids)
    assert p.acquire_many(2, timeout=0.1) is None     # one free: none taken
    assert p.available() == 1
    with pytest.raises(dlock.InvalidArgument):
        p.acquire_many(4, timeout=0)                  # more than the total: never
    with pytest.raises(dlock.InvalidArgument):
        p.acquire_many(0)
    # a waiter for 2 in another thread is served when 2 come back together
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("ids", other.permit_semaphore(name)
                                                       .acquire_many(2, timeout=within(10))))
    t.start()
    time.sleep(0.2)
    assert "ids" not in out
    one = p.acquire()
    assert p.try_release_many([ids[0], "f" * 32]) is False   # one not held: none back
    assert p.available() == 0 and p.acquired() == 3
    with pytest.raises(dlock.NotOwnerError):
        p.release_many(["f" * 32, ids[1]])
    p.release_many(ids)
    t.join(within(10))
    got = out["ids"]
    assert got and len(got) == 2 and p.available() == 0
    assert p.try_release_many(got + [one]) is True and p.available() == 3
    with pytest.raises(dlock.InvalidArgument):
        p.release_many(ids[0])                        # one id, not a list


def test_latch(client, name):
    d = client.latch(name)
    assert d.try_set_count(2) is True and d.try_set_count(3) is False
    assert d.count() == 2
    assert d.wait(0.1) is False
    for k in (0.1, 0.2):
        threading.Timer(k, client.latch(name).count_down).start()
    t0 = time.monotonic()
    assert d.wait(within(5)) is True
    assert time.monotonic() - t0 >= 0.15
    assert d.count() == 0 and d.wait(0) is True


def test_multi_lock_all_or_nothing(client, name, r):
    a, b, c = (client.lock("%s:%s" % (name, x)) for x in "abc")
    m = client.multi_lock([a, b])
    with m:
        assert a.held() and b.held()
        other = client.multi_lock([client.lock("%s:c" % name), client.lock("%s:b" % name)])
        assert in_thread(lambda: other.acquire(timeout=0.2)) is False
        assert not c.locked()                        # nothing held while it waited
    assert not a.locked() and not b.locked()
    with pytest.raises(dlock.InvalidArgument):
        client.multi_lock([a, a])


def test_red_lock_majority():
    servers = [Server() for _ in range(3)]
    clients = []
    try:
        clients = [dlock.Client(s.url, watchdog=3.0) for s in servers]
        rl = clients[0].red_lock([c.lock("py:red") for c in clients])
        servers[2].stop()                            # a majority is still there
        with rl:
            assert [s.redis().exists("py:red") for s in servers[:2]] == [1, 1]
        assert [s.redis().exists("py:red") for s in servers[:2]] == [0, 0]
        with pytest.raises(dlock.InvalidArgument):
            clients[0].red_lock([clients[0].lock("x"), clients[1].lock("x")])
    finally:
        for c in clients:
            c.close()
        for s in servers:
            s.stop()


def test_election(client, name):
    e = client.election(name)
    observer = client.election(name)
    assert e.leader().term == 0
    term = e.campaign()
    assert term and e.term == term
    lead = observer.leader()
    assert lead.term == term and str(os.getpid()) in lead.who
    assert client.election(name).campaign(timeout=0.1) is None      # one leader
    threading.Timer(0.2, e.resign).start()
    change = observer.await_change(term, timeout=within(5))
    assert change is not None and change.term == 0
    with e:
        assert e.term > term                                      # terms only grow
    assert observer.await_change(0, timeout=0) is None


def _script_calls(r):
    """EVAL and EVALSHA calls the server has counted since its last RESETSTAT."""
    stats = r.info("commandstats")
    return sum(stats.get("cmdstat_" + c, {}).get("calls", 0) for c in ("eval", "evalsha"))


def test_spin_lock_shares_the_lock_and_subscribes_to_nothing(client, other, name, r):
    s = client.spin_lock(name, backoff=dlock.Backoff(0.25, 0.25, 1))   # a constant 250 ms step
    assert s.kind == "spin"
    with s:
        assert s.acquire(timeout=0)                      # reentrant, Redisson's RLock hash
        assert r.hgetall(name) == {s.owner.encode(): b"2"}
        assert other.lock(name).acquire(timeout=0) is False   # an RLock of the name waits
        s.release()
    assert r.exists(name) == 0
    channel = "redisson_lock__channel:{%s}" % name
    held = other.lock(name)
    held.acquire()
    out = {}

    def spin_waiter():
        out["got"] = s.acquire(timeout=within(20))
        out["at"] = time.monotonic()
        out["held"] = s.held()
        s.release()
    t = threading.Thread(target=spin_waiter)
    r.config_resetstat()
    t.start()
    time.sleep(1.0)
    calls = _script_calls(r)
    assert r.pubsub_numsub(channel)[0][1] == 0           # no subscription while it waits
    # about one attempt a step (two tries as the wait starts, a step each, the
    # holder's renewal): 7 here; 17 with the default back-off
    assert 2 <= calls <= 1.0 / 0.25 + 5, calls
    # a pub/sub lock's waiter (another name) is counted there: the check can fail
    control = other.lock(name + ":control")
    control.acquire()
    w = threading.Thread(target=lambda: client.lock(name + ":control").acquire(
        timeout=within(20)) and client.lock(name + ":control").release())
    w.start()
    assert until(lambda: r.pubsub_numsub("redisson_lock__channel:{%s:control}" % name)[0][1] == 1)
    released = time.monotonic()
    held.release()
    t.join(within(20))
    assert out["got"] is True and out["held"] is True
    assert out["at"] - released < 0.25 + within(0.5)     # found within a step or so
    control.release()
    w.join(within(20))
    assert not w.is_alive() and r.exists(name) == 0


def test_spin_lock_bad_backoff(client, name):
    for bad in [(0, 0.1, 2), (0.2, 0.1, 2), (0.001, 0.128, 0), (0.001, 0.128, 1.5),
                (-1, 0.1, 2), (0.001, 7200, 2)]:
        with pytest.raises(dlock.InvalidArgument):
            client.spin_lock(name, backoff=bad)
    with pytest.raises(TypeError):
        client.lock(name, backoff=(0.001, 0.1, 2))       # only a spin lock has one
    assert client.spin_lock(name, backoff=(0.005, 0.005, 1)).acquire(timeout=0)


@pytest.mark.parametrize("fair", [False, True])
def test_non_reentrant_lock_refuses_its_holder(client, other, name, r, fair):
    make = client.non_reentrant_fair_lock if fair else client.non_reentrant_lock
    n = make(name)
    assert n.kind == ("nonreentrant_fair" if fair else "nonreentrant")
    assert n.acquire()
    for again in (lambda: n.acquire(timeout=0), lambda: n.acquire(timeout=1),
                  lambda: make(name).acquire()):
        with pytest.raises(dlock.ReentryError) as ei:
            again()
        assert isinstance(ei.value, RuntimeError) and ei.value.errname == "DLOCK_EREENTRY"
        assert ei.value.code == -20
    with pytest.raises(dlock.ReentryError):
        with n:
            pass
    # nothing written: Redisson's RLock hash with a hold count of 1, still held
    assert r.hgetall(name) == {n.owner.encode(): b"1"} and n.hold_count == 1 and n.held()
    assert in_thread(lambda: n.acquire(timeout=0.1)) is False    # another owner waits
    if not fair:
        assert other.lock(name).acquire(timeout=0) is False       # so does an RLock
    got = []
    t = threading.Thread(target=lambda: got.append(n.acquire(timeout=within(20)) and
                                                   (n.release() or True)))
    t.start()
    if fair:
        assert until(lambda: r.llen("redisson_lock_queue:{%s}" % name) == 1)
    else:
        time.sleep(0.1)
    n.release()
    t.join(within(20))
    assert got == [True] and r.exists(name) == 0
    with pytest.raises(dlock.NotOwnerError):
        n.release()
    with n:                                              # with: one hold, released
        assert n.hold_count == 1
    assert not n.locked()


def test_errors_map_to_builtins(client, name, r, url):
    with pytest.raises(dlock.InvalidArgument) as ei:
        client.lock("")
    assert isinstance(ei.value, ValueError)
    with pytest.raises(ValueError):
        client.lock("a\0b")
    with pytest.raises(dlock.NameTooLong) as ei:
        client.lock("x" * 5000)
    assert isinstance(ei.value, ValueError) and ei.value.errname == "DLOCK_ENAMETOOLONG"
    r.set(name, "not a lock")
    with pytest.raises(dlock.WrongTypeError):
        client.lock(name).acquire()
    assert r.get(name) == b"not a lock"                          # left as it was
    with pytest.raises(dlock.InvalidArgument):
        dlock.Client("http://nowhere")
    with socketless_port() as port:
        with pytest.raises(dlock.ConnectionError) as ei:
            dlock.Client("redis://127.0.0.1:%d" % port, connect_timeout=1, retry=(0, 0.1))
    assert isinstance(ei.value, builtins.ConnectionError)
    assert "127.0.0.1:%d" % port in str(ei.value)
    with pytest.raises(TypeError):
        dlock.Client(url, no_such_option=1)
    # The server clock check's allowance: seconds, False off; bad values refused.
    for ok in (0.1, 0, False):
        with dlock.Client(url, clock_jump=ok) as c, c.lock(name + ":clk"):
            pass
    for bad in (-1, "1", 86400.001):
        with pytest.raises(dlock.InvalidArgument):
            dlock.Client(url, clock_jump=bad)


def _header_statuses():
    """Every status code of include/dlock/dlock.h: {value: name}, read from
    the header itself (a code added there and not here fails the test)."""
    with open(os.path.join(SRC, "include", "dlock", "dlock.h")) as f:
        text = f.read()
    body = re.search(r"typedef enum dlock_status \{(.*?)\} dlock_status;", text, re.S)
    assert body, "dlock_status not found in dlock.h"
    body = re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S)
    codes = {int(v): n for n, v in re.findall(r"\b(DLOCK_[A-Z0-9_]+)\s*=\s*(-?\d+)", body)}
    assert len(codes) >= 22 and codes[0] == "DLOCK_OK"
    return codes


def test_every_status_code_has_its_exception():
    from dlock._errors import _BY_CODE, error_class
    from dlock._lib import make_error
    codes = _header_statuses()
    del codes[0]
    assert sorted(_BY_CODE) == sorted(codes)         # none missing, none stale
    classes = set()
    for code, cname in codes.items():
        cls = error_class(code)
        assert cls is not dlock.Error and issubclass(cls, dlock.Error), cname
        assert cname in cls.__doc__, (cname, cls)    # the class says which code it is
        assert cls.__name__ in dlock.__all__ and getattr(dlock, cls.__name__) is cls
        classes.add(cls)
        e = make_error(code, "")
        assert type(e) is cls and e.code == code and e.errname == cname
        assert str(e)                                 # dlock_strerror's text at least
    assert len(classes) == len(codes)                 # one class per code
    assert issubclass(dlock.ReentryError, RuntimeError)
    assert issubclass(dlock.NotFoundError, LookupError)


class socketless_port:
    """A loopback port nothing listens on."""

    def __enter__(self):
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.s = s
        return s.getsockname()[1]

    def __exit__(self, *exc):
        self.s.close()


def test_collected_handle_keeps_its_hold(url, name, r):
    with dlock.Client(url, watchdog=1.0) as c:
        l = c.lock(name)
        l.acquire()
        owner = l.owner
        del l
        gc.collect()
        time.sleep(1.5)                  # past the watchdog timeout: renewed all along
        assert r.hgetall(name) == {owner.encode(): b"1"}
        again = c.lock(name)             # the owner is the thread, not the object
        assert again.held()
        again.release()
        assert r.exists(name) == 0


def test_on_lost_called_safely(url, name, r, caplog):
    seen = []
    with dlock.Client(url, watchdog=3.0) as c:
        @c.on_lost
        def boom(ev):
            raise RuntimeError("callback failure")
        c.on_lost(seen.append)
        l = c.lock(name)
        l.acquire()
        with caplog.at_level(logging.ERROR, logger="dlock"):
            r.delete(name)                           # someone else deletes it
            assert until(lambda: seen, 5.0)
        ev = seen[0]
        assert ev.name == name and ev.owner == l.owner
        assert ev.reason == dlock.LostReason.GONE and ev.cause
        assert any("callback failure" in rec.getMessage() or
                   (rec.exc_info and "callback failure" in str(rec.exc_info[1]))
                   for rec in caplog.records)
        with pytest.raises(dlock.NotOwnerError):
            l.release()
        c.ping()                                     # the client goes on


@pytest.mark.parametrize("kind", ["lock", "rate_limiter"])
def test_close_ends_waits(url, name, kind):
    c = dlock.Client(url)
    if kind == "lock":
        holder = c.lock(name)
        holder.acquire()
        waiter = c.lock(name)
    else:                                            # a rate limiter's timed sleep
        holder = waiter = c.rate_limiter(name)
        holder.try_set_rate(1, 3600)
        holder.acquire()
    out = {}

    def wait():
        try:
            waiter.acquire()
        except dlock.Error as e:
            out["e"] = e
    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.2)
    c.close()
    t.join(within(10))
    assert not t.is_alive() and isinstance(out.get("e"), dlock.ClosedError)
    with pytest.raises(dlock.ClosedError):
        holder.acquire()
    assert c.closed
    c.close()                                        # idempotent


def test_fork_child_gets_a_clear_error(client, name, url, r):
    l = client.lock(name)
    pid = os.fork()
    if pid == 0:                                     # the child
        code = 1
        try:
            l.acquire()
        except dlock.ForkError as e:
            code = 2 if "fork" in str(e) and isinstance(e, RuntimeError) else 3
        if code == 2:
            try:
                with dlock.Client(url) as own, own.lock(name + ":child"):
                    code = 0
            except Exception:
                code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    with l:                                          # the parent's client still works
        assert r.exists(name) == 1


def test_stats_stripes_ids(client, name):
    before = client.stats()["acquisitions"]
    with client.lock(name):
        pass
    s = client.stats()
    assert s["acquisitions"] == before + 1 and "gone" in s["lost"]
    assert dlock.stripe_name("orders", "abc", 16) == "orders:segment:%d" % (
        zlib.crc32(b"abc") % 16)
    assert dlock.stripe_name("orders", 42, 16) == "orders:segment:10"
    assert client.owner_id.startswith(client.id + ":")
    assert client.new_owner_id() != client.owner_id
    client.ping()


def test_transfer_and_adopt(client, other, name):
    """A hold handed to another thread: nobody else gets it in between, the
    receiver's release frees it."""
    lock = client.lock(name)
    got = {}
    ready, handed = threading.Event(), threading.Event()

    def receiver():
        got["id"] = client.owner_id            # this thread's owner id
        ready.set()
        handed.wait(within(5))
        got["count"] = lock.adopt()
        got["held"] = lock.held()
        lock.release()

    t = threading.Thread(target=receiver)
    t.start()
    assert ready.wait(within(5))
    lock.acquire()
    lock.acquire()                               # a reentrant hold: the count goes along
    lock.transfer(got["id"])
    assert not lock.held()                       # the giver holds nothing now
    assert other.lock(name).acquire(timeout=0) is False   # nobody else in between
    handed.set()
    t.join(within(10))
    assert got["count"] == 2 and got["held"] is True
    assert lock.locked()                         # one release of two
    with pytest.raises(dlock.NotOwnerError):
        lock.adopt()                             # nothing handed to this thread
    with pytest.raises(dlock.InvalidArgument):
        lock.transfer(42)


def test_election_handover(client, name):
    successor_id = client.new_owner_id()
    leader = client.election(name)
    successor = client.election(name, owner=successor_id)
    term = leader.campaign()
    leader.handover(successor_id)
    assert leader.term == 0
    assert client.election(name).campaign(timeout=0) is None   # no campaign wins in between
    new_term = successor.adopt()
    assert new_term > term and successor.term == new_term
    assert leader.leader().term == new_term
    successor.resign()
    with pytest.raises(dlock.NotOwnerError):
        successor.adopt()


def test_barrier(client, other, name):
    """Three parties: none goes on before the third has entered; leaving
    waits for the last."""
    order = []
    parties = [client.barrier(name, 3), client.barrier(name, 3), other.barrier(name, 3)]
    assert len({p.member for p in parties}) == 3 and parties[0].parties == 3
    assert parties[0].enter(timeout=0) is False   # alone: not entered, withdrawn
    assert parties[0].phase == "out"

    def party(i, delay):
        time.sleep(delay)
        order.append(("call", i, time.monotonic()))
        with parties[i]:
            order.append(("in", i, time.monotonic(), parties[i].round))
            time.sleep(0.05 * i)
        order.append(("out", i, time.monotonic()))

    ts = [threading.Thread(target=party, args=(i, 0.2 * i)) for i in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(within(30))
    last_call = max(e[2] for e in order if e[0] == "call")
    ins = [e for e in order if e[0] == "in"]
    assert len(ins) == 3 and all(e[2] >= last_call for e in ins)
    assert len({e[3] for e in ins}) == 1 and ins[0][3] > 0        # one round, named
    in2 = [e[2] for e in ins if e[1] == 2][0]                      # party 2 stays 100 ms
    assert all(e[2] >= in2 + 0.1 for e in order if e[0] == "out")
    assert parties[0].status() == (0, 0, False)


def test_barrier_async(client, other, name):
    import asyncio

    async def main():
        a, b = client.barrier(name, 2), other.barrier(name, 2)
        assert await a.enter_async(timeout=0.2) is False          # alone
        await asyncio.gather(a.enter_async(), b.enter_async())
        assert a.phase == "in" and a.round == b.round
        async with client.barrier(name + ":2", 1) as solo:
            assert solo.phase == "in"
        await asyncio.gather(a.leave_async(), b.leave_async())
        assert a.phase == "out"
    asyncio.run(main())
