"""asyncio: tasks on one thread are owners of their own, waits cost no
thread, cancellation leaves nothing held or queued, every type's async form."""

import asyncio
import threading
import time

import pytest

import dlock
from conftest import within


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, within(60)))


def test_tasks_take_turns_on_one_thread(client, name):
    async def main():
        l = client.lock(name)
        inside = [0]
        overlap = []

        async def work(i):
            for _ in range(5):
                async with l:
                    assert l.held() and l.hold_count == 1
                    inside[0] += 1
                    if inside[0] != 1:
                        overlap.append(i)
                    await asyncio.sleep(0.002)
                    inside[0] -= 1
        await asyncio.gather(*(work(i) for i in range(6)))
        return overlap
    assert run(main()) == []


def test_a_task_does_not_reenter_another_tasks_hold(client, name):
    async def main():
        l = client.lock(name)
        assert await l.acquire_async()
        assert await l.acquire_async(timeout=0)          # the same task: reentrant
        assert l.hold_count == 2

        async def other():
            got = await l.acquire_async(timeout=0.2)
            with pytest.raises(dlock.NotOwnerError):
                await l.release_async()
            return got, l.held(), l.owner
        got, held, owner = await asyncio.create_task(other())
        assert got is False and held is False and owner != l.owner
        await l.release_async()
        await l.release_async()
        assert not l.locked()
    run(main())


def test_cancel_leaves_nothing_held_or_queued(client, other, name, r):
    f = other.fair_lock(name)
    f.acquire()

    async def main():
        l = client.fair_lock(name)
        t = asyncio.create_task(l.acquire_async())
        for _ in range(200):
            await asyncio.sleep(0.01)
            if r.llen("redisson_lock_queue:{%s}" % name) == 1:
                break
        assert r.llen("redisson_lock_queue:{%s}" % name) == 1     # queued
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        assert r.llen("redisson_lock_queue:{%s}" % name) == 0     # left, once cancelled
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(l.acquire_async(), 0.2)
    run(main())
    f.release()
    time.sleep(0.3)
    assert r.exists(name) == 0                    # no grant left behind for a gone task


def test_a_grant_for_a_cancelled_task_is_given_back(client, other, name, r):
    """The lock freed while the task's cancellation is on its way: whichever
    wins, nothing stays held once the dust settles."""
    h = other.lock(name)

    async def main():
        l = client.lock(name)
        assert await h.acquire_async()          # (the loop must keep running: no
        await h.release_async()                 # blocking call from a coroutine)

        async def take():
            if await l.acquire_async():
                await l.release_async()
        for i in range(10):
            await h.acquire_async()
            t = asyncio.create_task(take())
            await asyncio.sleep(0.05)
            await h.release_async()
            await asyncio.sleep(0.0005 * i)
            t.cancel()
            try:
                await t
            except asyncio.CancelledError:
                pass
        await asyncio.sleep(0.3)
    run(main())
    assert r.exists(name) == 0


def test_waiting_tasks_cost_no_thread(client, other, name):
    h = other.lock(name)

    async def main():
        await h.acquire_async()          # held by this task (the owner inside asyncio)
        threads = threading.active_count()
        l = client.lock(name)
        order = []

        async def take(i):
            assert await l.acquire_async(timeout=within(20))
            order.append(i)
            await l.release_async()
        ts = [asyncio.create_task(take(i)) for i in range(50)]
        await asyncio.sleep(0.3)
        assert threading.active_count() <= threads + 1 and order == []
        h.release()                      # no wait: a round trip from the loop is fine
        await asyncio.gather(*ts)
        assert sorted(order) == list(range(50))
    run(main())


def test_every_type_async(client, name, r):
    async def main():
        s = client.semaphore(name + ":s")
        s.try_set_permits(1)
        async with s:
            assert s.available() == 0
            assert await s.acquire_async(timeout=0.1) is False
        p = client.permit_semaphore(name + ":p")
        p.try_set_permits(1)
        pid = await p.acquire_async(lease=5)
        assert len(pid) == 32 and await p.acquire_async(timeout=0.1) is None
        await p.release_async(pid)
        with pytest.raises(dlock.NotOwnerError):
            await p.release_async(pid)
        p.add_permits(1)
        ids = await p.acquire_many_async(2, lease=5)
        assert len(ids) == 2 and p.available() == 0
        assert await p.acquire_many_async(1, timeout=0.1) is None
        await p.release_many_async(ids)
        with pytest.raises(dlock.NotOwnerError):
            await p.release_many_async(ids)
        assert p.available() == 2
        d = client.latch(name + ":d")
        d.try_set_count(1)
        assert await d.wait_async(0.1) is False
        asyncio.get_running_loop().call_later(0.1, lambda: asyncio.ensure_future(
            d.count_down_async()))
        assert await d.wait_async(within(5)) is True
        e = client.election(name + ":e")
        term = await e.campaign_async()
        assert term and e.term == term
        watcher = asyncio.create_task(client.election(name + ":e").await_change_async(
            term, timeout=within(5)))
        await asyncio.sleep(0.05)
        await e.resign_async()
        assert (await watcher).term == 0
        rw = client.read_write_lock(name + ":rw")
        async with rw.write:
            assert r.hget(name + ":rw", "mode") == b"write"
        m = client.multi_lock([client.lock(name + ":a"), client.lock(name + ":b")])
        async with m:
            assert r.exists(name + ":a") and r.exists(name + ":b")
        assert not r.exists(name + ":a")
        f = client.fenced_lock(name + ":f")
        async with f:
            t1 = f.token
        async with f:
            assert f.token > t1
    run(main())


def test_spin_and_non_reentrant_locks_async(client, other, name, r):
    async def main():
        n = client.non_reentrant_lock(name + ":n")
        assert await n.acquire_async()
        with pytest.raises(dlock.ReentryError):          # the same task again: refused
            await n.acquire_async(timeout=0)
        assert r.hgetall(name + ":n") == {n.owner.encode(): b"1"}

        async def another_task():                        # another owner: it waits
            return await n.acquire_async(timeout=0.2)
        assert await asyncio.create_task(another_task()) is False
        await n.release_async()
        nf = client.non_reentrant_fair_lock(name + ":nf")
        async with nf:
            with pytest.raises(dlock.ReentryError):
                async with nf:
                    pass
            assert nf.hold_count == 1
        assert not r.exists(name + ":nf")
        h = other.lock(name + ":s")
        await h.acquire_async()
        s = client.spin_lock(name + ":s", backoff=(0.02, 0.02, 1))

        async def spin_task():
            got = await s.acquire_async(timeout=within(10))
            held = s.held()
            await s.release_async()
            return got, held
        t = asyncio.create_task(spin_task())
        await asyncio.sleep(0.2)
        assert not t.done()
        assert r.pubsub_numsub("redisson_lock__channel:{%s:s}" % name)[0][1] == 0
        await h.release_async()
        assert await t == (True, True)
        await h.acquire_async()
        t = asyncio.create_task(s.acquire_async())       # cancelled: nothing taken after
        await asyncio.sleep(0.1)
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        await h.release_async()
        await asyncio.sleep(0.1)
        assert not r.exists(name + ":s")
    run(main())
