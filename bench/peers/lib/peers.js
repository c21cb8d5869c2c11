'use strict';
// Adapters giving the three peer libraries one small interface:
//
//   const peer = createPeer(name, opts)
//   peer.config                      -> plain object describing the settings (goes into the JSON)
//   const w = await peer.newWorker() -> a worker with its OWN Redis connection(s)
//   const h = await w.acquire(name)  -> blocks until held (never gives up, see settings below)
//   await w.release(h)
//   await w.close()
//   w.connections                    -> the ioredis instances the worker uses
//
//   const hw = await peer.newHeldWorker(watchdogMs)   (scenario "held")
//   const h = await hw.hold(name)    -> acquired with the peer's auto-renewal, period ~ watchdogMs/3
//   await hw.release(h); hw.lostCount(); await hw.close(); hw.connections; hw.config
//
// Lease used outside "held": 30 000 ms for every peer (Redisson's default
// watchdog timeout). It never matters there (holds are ~1 ms, or 3 s in
// "idle"), and no renewal fires during those runs.

const Redis = require('ioredis');
const { Redisson } = require('node-redisson');
const { Redlock } = require('@sesamecare-oss/redlock');
const { Mutex, Semaphore } = require('redis-semaphore');
const { redisOptionsFromUrl } = require('./util');

const DEFAULT_LEASE_MS = 30000;

const PEERS = ['node-redisson', 'redlock', 'redis-semaphore', 'redis-semaphore-sem'];

function ioredisClient(url) {
  // Plain ioredis, default options (as each peer's README shows).
  return new Redis(redisOptionsFromUrl(url));
}

// Waits until every connection answers PING; fails after 10 s (ioredis
// would otherwise keep reconnecting forever to an unreachable server).
async function ready(conns) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error('Redis did not answer PING within 10 s')), 10000);
  });
  try {
    await Promise.race([Promise.all(conns.map((c) => c.ping())), limit]);
  } finally {
    clearTimeout(timer);
  }
}

// ------------------------------------------------------------ node-redisson
// Redisson's RLock ported to Node. lock() waits forever: it subscribes to
// redisson_lock__channel:{name} and waits for the unlock message, or for the
// lock's remaining TTL, whichever comes first, then retries. Nothing to raise.
// Each Redisson instance owns two ioredis connections (commands + subscriber).
// The watchdog renews every lockWatchdogTimeout/3 (fixed ratio, as in Redisson).
function nodeRedisson(opts) {
  const config = {
    library: 'node-redisson',
    lease: 'watchdog',
    lockWatchdogTimeout_ms: DEFAULT_LEASE_MS,
    wait: 'pub/sub (redisson_lock__channel) with TTL timeout; lock() never gives up',
    connections_per_worker: 2,
  };
  function make(watchdogMs) {
    const r = new Redisson({
      redis: { options: redisOptionsFromUrl(opts.url) },
      lockWatchdogTimeout: BigInt(watchdogMs),
    });
    return r;
  }
  return {
    config,
    async newWorker() {
      const r = make(DEFAULT_LEASE_MS);
      const conns = [r.commandExecutor.redis, r.commandExecutor.subscribeRedis];
      await ready(conns);
      return {
        connections: conns,
        async acquire(name) {
          const l = r.getLock(name);
          await l.lock();
          return l;
        },
        async release(l) {
          await l.unlock();
        },
        async close() {
          await r.quit();
        },
      };
    },
    async newHeldWorker(watchdogMs) {
      // lockWatchdogTimeout = watchdogMs: keys get PEXPIRE watchdogMs, the
      // renewal timer fires every watchdogMs/3 (one EVALSHA per lock).
      const r = make(watchdogMs);
      const conns = [r.commandExecutor.redis, r.commandExecutor.subscribeRedis];
      await ready(conns);
      return {
        connections: conns,
        config: {
          lockWatchdogTimeout_ms: watchdogMs,
          renewal_period_ms: Math.floor(watchdogMs / 3),
          how: 'Redisson({lockWatchdogTimeout: MS}); lock() without leaseTime starts the watchdog (setTimeout per lock, MS/3)',
        },
        async hold(name) {
          const l = r.getLock(name);
          await l.lock();
          return l;
        },
        async release(l) {
          await l.unlock();
        },
        lostCount() {
          return null; // the watchdog stops silently when a renewal finds the lock gone
        },
        async close() {
          await r.quit();
        },
      };
    },
  };
}

// ---------------------------------------------------------------- redlock
// @sesamecare-oss/redlock with ONE Redis node (quorum 1). Acquisition polls:
// one SET-if-absent script per attempt, then sleeps retryDelay +- retryJitter.
// retryCount is raised from the default 10 to -1 (= unlimited) so contended
// workers never give up; retryDelay/retryJitter stay at the library defaults
// (200 ms / 100 ms) unless --retry-delay-ms / --retry-jitter-ms are given.
function redlock(opts) {
  const retryDelay = opts.retryDelayMs ?? 200;
  const retryJitter = opts.retryJitterMs ?? 100;
  const config = {
    library: '@sesamecare-oss/redlock',
    nodes: 1,
    lease_ms: DEFAULT_LEASE_MS,
    lease: 'fixed duration (acquire/release; no extension needed for these holds)',
    retryCount: -1,
    retryDelay_ms: retryDelay,
    retryJitter_ms: retryJitter,
    wait: 'polling',
    connections_per_worker: 1,
  };
  return {
    config,
    async newWorker() {
      const client = ioredisClient(opts.url);
      await ready([client]);
      const rl = new Redlock([client], { retryCount: -1, retryDelay, retryJitter });
      return {
        connections: [client],
        async acquire(name) {
          return rl.acquire([name], DEFAULT_LEASE_MS);
        },
        async release(lock) {
          await lock.release();
        },
        async close() {
          await rl.quit();
        },
      };
    },
    async newHeldWorker(watchdogMs) {
      // Auto-extension is only available through using(): it re-arms a timer
      // at (lock.expiration - now - automaticExtensionThreshold), where
      // lock.expiration = start + duration - drift and
      // drift = round(driftFactor * duration) + 2. With duration = MS and
      // threshold = MS - MS/3 - drift the extension fires every ~MS/3.
      const duration = watchdogMs;
      const drift = Math.round(0.01 * duration) + 2;
      const period = Math.floor(watchdogMs / 3);
      const threshold = duration - period - drift;
      if (threshold < 0 || threshold > duration - 100) {
        throw new Error(`--watchdog-ms ${watchdogMs} too small for redlock's using() constraints`);
      }
      const client = ioredisClient(opts.url);
      await ready([client]);
      // retryCount 0: in "held" nothing is contended, so acquire succeeds at
      // the first attempt; a failed extension is retried by using() itself
      // while the lock has not expired; and releasing a lock that already
      // expired then fails at once instead of retrying 10 x 200 ms (the
      // default), which made cleanup after an overloaded run take minutes.
      const rl = new Redlock([client], { automaticExtensionThreshold: threshold, retryCount: 0 });
      let lost = 0;
      return {
        connections: [client],
        config: {
          duration_ms: duration,
          automaticExtensionThreshold_ms: threshold,
          retryCount: 0,
          renewal_period_ms: period,
          how: 'redlock.using([name], MS, routine) with automaticExtensionThreshold = MS - MS/3 - drift (drift = round(0.01*MS)+2)',
        },
        hold(name) {
          return new Promise((resolveHeld, rejectHeld) => {
            let releaseRoutine;
            const gate = new Promise((r) => (releaseRoutine = r));
            const h = { release: releaseRoutine, done: null, error: null };
            h.done = rl
              .using([name], duration, async (signal) => {
                resolveHeld(h);
                await gate;
                if (signal.aborted) lost++;
              })
              .catch((e) => {
                h.error = e;
                rejectHeld(e); // no-op if already held
              });
          });
        },
        async release(h) {
          h.release();
          await h.done;
          if (h.error) throw h.error;
        },
        lostCount() {
          return lost;
        },
        async close() {
          await rl.quit();
        },
      };
    },
  };
}

// -------------------------------------------------------- redis-semaphore
// redis-semaphore's Mutex. Acquisition polls: SET key id PX lockTimeout NX,
// then sleeps retryInterval (default 10 ms) and retries. acquireTimeout is
// raised from the default 10 000 ms to Infinity (acquireAttemptsLimit is
// already Infinity by default) so contended workers never give up.
function redisSemaphore(opts) {
  const retryInterval = opts.retryDelayMs ?? 10;
  const base = {
    lockTimeout: DEFAULT_LEASE_MS,
    acquireTimeout: Infinity,
    acquireAttemptsLimit: Infinity,
    retryInterval,
    // refreshInterval left at its default, 0.8 * lockTimeout = 24 000 ms.
  };
  const config = {
    library: 'redis-semaphore',
    class: 'Mutex',
    lockTimeout_ms: DEFAULT_LEASE_MS,
    refreshInterval_ms: Math.round(DEFAULT_LEASE_MS * 0.8),
    acquireTimeout: 'Infinity',
    acquireAttemptsLimit: 'Infinity',
    retryInterval_ms: retryInterval,
    wait: 'polling',
    connections_per_worker: 1,
  };
  return {
    config,
    async newWorker() {
      const client = ioredisClient(opts.url);
      await ready([client]);
      return {
        connections: [client],
        async acquire(name) {
          const m = new Mutex(client, name, base);
          await m.acquire();
          return m;
        },
        async release(m) {
          await m.release();
        },
        async close() {
          await client.quit();
        },
      };
    },
    async newHeldWorker(watchdogMs) {
      const client = ioredisClient(opts.url);
      await ready([client]);
      const period = Math.floor(watchdogMs / 3);
      let lost = 0;
      const hopts = {
        ...base,
        lockTimeout: watchdogMs,
        refreshInterval: period,
        onLockLost: () => {
          lost++;
        },
      };
      return {
        connections: [client],
        config: {
          lockTimeout_ms: watchdogMs,
          refreshInterval_ms: period,
          renewal_period_ms: period,
          how: 'new Mutex(client, name, {lockTimeout: MS, refreshInterval: MS/3}) (setInterval per lock)',
        },
        async hold(name) {
          const m = new Mutex(client, name, hopts);
          await m.acquire();
          return m;
        },
        async release(m) {
          await m.release();
        },
        lostCount() {
          return lost;
        },
        async close() {
          await client.quit();
        },
      };
    },
  };
}

// ---------------------------------------------------- redis-semaphore-sem
// redis-semaphore's Semaphore, for dlock's semaphore scenarios (the lock
// scenarios on a semaphore of one permit). Acquisition polls: one script per
// attempt (drop expired holders from a sorted set, add this one if fewer
// than `limit` are there), then sleeps retryInterval (default 10 ms).
// Same settings as the Mutex above; limit 1 by default (--limit N).
function redisSemaphoreSem(opts) {
  const retryInterval = opts.retryDelayMs ?? 10;
  const limit = opts.limit ?? 1;
  const base = {
    lockTimeout: DEFAULT_LEASE_MS,
    acquireTimeout: Infinity,
    acquireAttemptsLimit: Infinity,
    retryInterval,
  };
  const config = {
    library: 'redis-semaphore',
    class: 'Semaphore',
    limit,
    lockTimeout_ms: DEFAULT_LEASE_MS,
    refreshInterval_ms: Math.round(DEFAULT_LEASE_MS * 0.8),
    acquireTimeout: 'Infinity',
    acquireAttemptsLimit: 'Infinity',
    retryInterval_ms: retryInterval,
    wait: 'polling',
    connections_per_worker: 1,
  };
  return {
    config,
    async newWorker() {
      const client = ioredisClient(opts.url);
      await ready([client]);
      return {
        connections: [client],
        async acquire(name) {
          const s = new Semaphore(client, name, limit, base);
          await s.acquire();
          return s;
        },
        async release(s) {
          await s.release();
        },
        async close() {
          await client.quit();
        },
      };
    },
    async newHeldWorker() {
      throw new Error('redis-semaphore-sem runs the semaphore scenarios (uncontended, handoff, idle) only');
    },
  };
}

function createPeer(name, opts) {
  switch (name) {
    case 'node-redisson':
      return nodeRedisson(opts);
    case 'redlock':
      return redlock(opts);
    case 'redis-semaphore':
      return redisSemaphore(opts);
    case 'redis-semaphore-sem':
      return redisSemaphoreSem(opts);
    default:
      throw new Error(`unknown --peer ${name} (expected one of: ${PEERS.join(', ')})`);
  }
}

// Key that a peer's lock NAME ends up as in Redis (for existence checks).
function redisKeyFor(peer, name) {
  if (peer === 'redis-semaphore') return `mutex:${name}`;
  if (peer === 'redis-semaphore-sem') return `semaphore:${name}`;
  return name;
}

module.exports = { createPeer, redisKeyFor, PEERS, DEFAULT_LEASE_MS };
