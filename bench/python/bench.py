#!/usr/bin/env python3
"""dlock's Python binding beside redis-py's Lock (Debian python3-redis) and
the C library, on the same redis-server in one run.

    bench.py --url URL --dlock-bench build-bench/bench/dlock_bench [--runs 5]
             [--client-cpu N] [--out bench/python/RESULTS.md] [--quick]

Scenarios, each run RUNS times (so that a machine's slow moments hit every
side), medians reported:
  uncontended   acquire + release cycles of one process on one name, in
                bursts of 2000 taken in turn (5 per run): the C library's own
                (dlock_bench uncontended), dlock's Python binding (`with
                lock:`, in a process kept across bursts) and redis-py's
                (`lock.acquire(); lock.release()`). The binding's overhead:
                each Python burst's rate against the C burst right before it
                (target: >= 0.8), and the ratio of their median cycles
  handoff       two processes take turns, each waiting in acquire() while
                the other holds ~2 ms: the gap from the holder's release
                (returned) to the waiter's acquisition, p50 / p99; the C
                library's (dlock_bench handoff, 2 processes, 1 ms holds) beside
  idle          20 threads of one process wait on a lock held by another
                process for 5 s: the commands/s Redis executes meanwhile
                (INFO's total_commands_processed, less this script's own)
Every client process is pinned to --client-cpu when given (make bench pins
redis-server to another). Prints JSON lines and a table; --out writes the table.
"""

import argparse
import json
import mmap
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))


def pin(cpu):
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})


def make_lock(impl, url, name):
    """(acquire(timeout=None), release, close) of one lock of impl."""
    if impl == "dlock":
        import dlock
        c = dlock.Client(url)
        lk = c.lock(name)
        return lk.acquire, lk.release, c.close
    import redis
    r = redis.Redis.from_url(url)
    lk = r.lock(name, timeout=60)     # redis-py 4: SET NX PX, polls every 0.1 s
    return (lambda: lk.acquire(blocking=True)), lk.release, r.close


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]

# ------------------------------------------------------------- workers


def w_uncontended(impl, url, cpu):
    """Serves bursts: reads a cycle count per line, answers the burst's
    rate and latencies (a process kept across bursts: no start-up in them)."""
    pin(cpu)
    acquire, release, close = make_lock(impl, url, "bench:py:uncontended:" + impl)
    for _ in range(300):
        acquire()
        release()
    print("ready", flush=True)
    for line in sys.stdin:
        cycles = int(line)
        lat = []
        t0 = time.perf_counter()
        for _ in range(cycles):
            t = time.perf_counter()
            acquire()
            release()
            lat.append(time.perf_counter() - t)
        secs = time.perf_counter() - t0
        print(json.dumps({"cycles": cycles, "cycles_per_s": cycles / secs,
                          "p50_us": pct(lat, 0.5) * 1e6, "p99_us": pct(lat, 0.99) * 1e6}),
              flush=True)
    close()
    return {}


# the page two handoff workers share: whose hold (-1: nobody's), when it was
# last released (time.monotonic, the same clock in every process), stop, and
# each worker's "ready"; each field written by one side at a time
HOLDER, T_REL, STOP, READY = 0, 8, 16, 24


def _get(mm, off, fmt="q"):
    return struct.unpack_from(fmt, mm, off)[0]


def _put(mm, off, v, fmt="q"):
    struct.pack_into(fmt, mm, off, v)


def w_handoff(impl, url, me, n, path, cpu, hold):
    """Takes turns with the other worker: waits until it holds, then waits
    in acquire() for its release; holds `hold` s (the other then waits in
    acquire()), releases. Records each gap: release returned -> acquired."""
    pin(cpu)
    acquire, release, close = make_lock(impl, url, "bench:py:handoff:" + impl)
    with open(path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), mmap.PAGESIZE)
    other = 1 - me
    gaps = []
    _put(mm, READY + 8 * me, 1)
    while not _get(mm, READY + 8 * other):
        time.sleep(0.001)
    if me == 0:
        acquire()
        _put(mm, HOLDER, 0)
        time.sleep(0.05)                     # the other starts waiting
        release()
        _put(mm, T_REL, time.monotonic(), "d")
    while not _get(mm, STOP):
        if _get(mm, HOLDER) != other:        # the other does not hold it yet
            time.sleep(0.00005)
            continue
        acquire()                            # waits until the other releases
        t_acq = time.monotonic()
        if _get(mm, STOP):
            release()
            break
        gaps.append(t_acq - _get(mm, T_REL, "d"))
        _put(mm, HOLDER, me)
        time.sleep(hold)                     # the other is waiting in acquire() meanwhile
        release()
        _put(mm, T_REL, time.monotonic(), "d")
        if len(gaps) >= n:
            _put(mm, STOP, 1)
    close()
    return {"gaps": gaps}


def w_idle(impl, url, waiters, cpu):
    """`waiters` threads wait on a lock another process holds."""
    pin(cpu)
    name = "bench:py:idle:" + impl
    if impl == "dlock":
        import dlock
        c = dlock.Client(url)
        fns = [(lk.acquire, lk.release) for lk in (c.lock(name) for _ in range(waiters))]
        close = c.close
    else:
        import redis
        r = redis.Redis.from_url(url)
        fns = [(lambda lk=lk: lk.acquire(blocking=True), lk.release)
               for lk in (r.lock(name, timeout=60) for _ in range(waiters))]
        close = r.close
    ts = [threading.Thread(target=lambda a=a, r=r: (a(), r())) for a, r in fns]
    for t in ts:
        t.start()
    print("ready", flush=True)
    for t in ts:
        t.join()
    close()
    return {}


def worker_main(args):
    conv = [json.loads(a) for a in args]
    fn = {"uncontended": w_uncontended, "handoff": w_handoff, "idle": w_idle}[conv.pop(0)]
    print(json.dumps(fn(*conv)), flush=True)

# ------------------------------------------------------------ the runs


def spawn(*args):
    return subprocess.Popen([sys.executable, __file__, "--worker"] +
                            [json.dumps(a) for a in args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def c_bench(path, cpu, *args):
    cmd = ([path] + list(args))
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def handoff(impl, url, n, cpu, hold):
    fd, path = tempfile.mkstemp(prefix="dlock-py-bench-")
    os.write(fd, b"\0" * mmap.PAGESIZE)
    os.close(fd)
    with open(path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), mmap.PAGESIZE)
        _put(mm, HOLDER, -1)
    try:
        ps = [spawn("handoff", impl, url, me, n // 2, path, cpu, hold) for me in (0, 1)]
        gaps = []
        for p in ps:
            out, _ = p.communicate()
            if p.returncode != 0:
                raise RuntimeError("handoff worker failed")
            gaps += json.loads(out.strip().splitlines()[-1])["gaps"]
    finally:
        os.unlink(path)
    return {"handoffs": len(gaps), "gap_p50_us": pct(gaps, 0.5) * 1e6,
            "gap_p99_us": pct(gaps, 0.99) * 1e6}


def idle(impl, url, waiters, seconds, cpu):
    import redis
    r = redis.Redis.from_url(url)
    name = "bench:py:idle:" + impl
    holder = make_lock(impl, url, name)
    holder[0]()
    p = spawn("idle", impl, url, waiters, cpu)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(1.0)                          # every waiter is in its wait
    c0 = r.info("stats")["total_commands_processed"]
    time.sleep(seconds)
    c1 = r.info("stats")["total_commands_processed"]
    holder[1]()
    p.communicate()
    holder[2]()
    cmds = c1 - c0 - 1                       # the second INFO counts itself
    return {"waiters": waiters, "seconds": seconds, "redis_commands": cmds,
            "commands_per_s": cmds / seconds}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--dlock-bench", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--client-cpu", type=int)
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    cycles, bursts = (1000, 2) if a.quick else (2000, 5)
    n_dl, n_rp = (60, 10) if a.quick else (200, 40)
    waiters, idle_s = 20, (2 if a.quick else 5)
    rows = []

    def rec(**kw):
        rows.append(kw)
        print(json.dumps(kw), flush=True)
    # Uncontended: bursts of C, Python and redis-py cycles in turn, BURSTS per
    # run, each Python burst's ratio to the C burst right before it.
    servers = {impl: spawn("uncontended", impl, a.url, a.client_cpu)
               for impl in ("dlock", "redis-py")}
    for p in servers.values():
        assert p.stdout.readline().strip() == "ready"

    def burst(impl, n):
        servers[impl].stdin.write("%d\n" % n)
        servers[impl].stdin.flush()
        return json.loads(servers[impl].stdout.readline())
    for i in range(a.runs):
        for b in range(bursts):
            cu = c_bench(a.dlock_bench, a.client_cpu, "uncontended", "--url", a.url,
                         "--cycles", str(cycles))
            rec(run=i, impl="C", scenario="uncontended",
                **{k: cu[k] for k in ("cycles_per_s", "p50_us", "p99_us")})
            pu = burst("dlock", cycles)
            rec(run=i, impl="dlock", scenario="uncontended",
                ratio_to_c=pu["cycles_per_s"] / cu["cycles_per_s"], **pu)
            rec(run=i, impl="redis-py", scenario="uncontended", **burst("redis-py", cycles))
    for p in servers.values():
        p.stdin.close()
        p.wait()
    for i in range(a.runs):
        ch = c_bench(a.dlock_bench, a.client_cpu, "handoff", "--url", a.url, "--mode",
                     "processes", "--workers", "2", "--seconds", "2" if a.quick else "3")
        rec(run=i, impl="C", scenario="handoff",
            **{k: ch[k] for k in ("gap_p50_us", "gap_p99_us")})
        rec(run=i, impl="dlock", scenario="handoff",
            **handoff("dlock", a.url, n_dl, a.client_cpu, 0.002))
        rec(run=i, impl="redis-py", scenario="handoff",
            **handoff("redis-py", a.url, n_rp, a.client_cpu, 0.002))
        if i < 2:   # the idle figures hardly move: two runs
            rec(run=i, impl="dlock", scenario="idle",
                **idle("dlock", a.url, waiters, idle_s, a.client_cpu))
            rec(run=i, impl="redis-py", scenario="idle",
                **idle("redis-py", a.url, waiters, idle_s, a.client_cpu))
    table = summarize(rows, a)
    print(table)
    if a.out:
        with open(a.out, "w") as f:
            f.write(table)


def summarize(rows, a):
    def med(impl, scen, field):
        v = [r[field] for r in rows if r["impl"] == impl and r["scenario"] == scen and field in r]
        return statistics.median(v) if v else float("nan")
    import redis
    info = redis.Redis.from_url(a.url).info("server")
    f0 = "{:,.0f}".format
    lines = [
        "# dlock for Python: benchmark",
        "",
        "%s, %d cores, Redis %s, Python %s, redis-py %s; clients on CPU %s; each figure the "
        "median of %d runs%s. Generated by bench/python/bench.py (make bench, section "
        "\"python\")." % (time.strftime("%Y-%m-%d"), os.cpu_count(), info["redis_version"],
                          sys.version.split()[0], redis.__version__,
                          a.client_cpu if a.client_cpu is not None else "any", a.runs,
                          " (QUICK: short runs, not for quoting)" if a.quick else ""),
        "",
        "| | dlock (Python) | redis-py `Lock` | dlock (C) |",
        "|---|---|---|---|",
        "| uncontended cycles/s (acquire + release) | %s | %s | %s |" % (
            f0(med("dlock", "uncontended", "cycles_per_s")),
            f0(med("redis-py", "uncontended", "cycles_per_s")),
            f0(med("C", "uncontended", "cycles_per_s"))),
        "| uncontended cycle p50 / p99 | %.0f / %.0f µs | %.0f / %.0f µs | %.0f / %.0f µs |" % (
            med("dlock", "uncontended", "p50_us"), med("dlock", "uncontended", "p99_us"),
            med("redis-py", "uncontended", "p50_us"), med("redis-py", "uncontended", "p99_us"),
            med("C", "uncontended", "p50_us"), med("C", "uncontended", "p99_us")),
        "| forced handoff gap p50 / p99 (2 processes) | %.0f / %.0f µs | %.1f / %.1f ms | "
        "%.0f / %.0f µs |" % (
            med("dlock", "handoff", "gap_p50_us"), med("dlock", "handoff", "gap_p99_us"),
            med("redis-py", "handoff", "gap_p50_us") / 1000,
            med("redis-py", "handoff", "gap_p99_us") / 1000,
            med("C", "handoff", "gap_p50_us"), med("C", "handoff", "gap_p99_us")),
        "| idle waiters' Redis commands/s (20 waiting threads) | %.1f | %.1f | |" % (
            med("dlock", "idle", "commands_per_s"), med("redis-py", "idle", "commands_per_s")),
        "",
        "The binding against the C library, uncontended: **%.2f×** the C cycle rate (the "
        "median of the ratios of each Python burst to the C burst right before it; target "
        "≥ 0.8×), **%.2f×** by their median cycles (C's p50 over Python's: less moved by "
        "what else the machine runs)." % (
            med("dlock", "uncontended", "ratio_to_c"),
            med("C", "uncontended", "p50_us") / med("dlock", "uncontended", "p50_us")),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2:])
    else:
        main()
