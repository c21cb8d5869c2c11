'use strict';
// Scenario "held": acquire N distinct names with the peer's auto-renewal
// configured for a renewal period of ~MS/3 (see peers.js newHeldWorker for
// how each peer is set up), then hold them for P renewal periods.
//
// Measured:
//   - bytes_per_lock: (RSS after acquiring all - RSS before) / N, each RSS
//     read after three forced GCs (global.gc, or V8's gc via --expose-gc set
//     at run time). Also heap_bytes_per_lock (V8 heapUsed) for reference.
//   - Redis side: INFO commandstats before/after the hold window (window =
//     P * floor(MS/3) ms); the sum of calls of every command except INFO,
//     divided by P. Commands that scripts run (redis.call) are counted by
//     Redis under their own names, so a renewal script shows up as EVALSHA
//     plus its inner commands. "commands" lists the per-command deltas.
//   - renewal round trips: every command the peer's own ioredis
//     connection(s) sent during the window (counted client-side by wrapping
//     sendCommand), divided by P.
//   - hold_cpu_ms: process.cpuUsage() (user+system) across the window.
//   - after the window: how many of the N keys still exist (EXISTS, batched),
//     and how many losses the peer itself reported.

const {
  intOpt,
  nowNs,
  sleep,
  statsConnection,
  commandStats,
  diffCounts,
  instrumentConnection,
  forEachLimited,
  settledRss,
  r1,
  r3,
  log,
} = require('./util');
const { redisKeyFor } = require('./peers');

async function run(peer, args, ctx) {
  const nLocks = intOpt(args, 'locks', 100000);
  const watchdogMs = intOpt(args, 'watchdogMs', 3000, { min: 300 });
  const periods = intOpt(args, 'periods', 3);
  const inflight = intOpt(args, 'acquireConcurrency', 64);
  const periodMs = Math.floor(watchdogMs / 3);
  const name = (i) => `dlock-bench:held:${i}`;

  const stats = await statsConnection(ctx.peerOpts.url);
  const hw = await peer.newHeldWorker(watchdogMs);
  const counter = { on: false, counts: {} };
  for (const c of hw.connections) instrumentConnection(c, counter);
  const handles = new Array(nLocks);
  try {
    // Warm-up: one lock on a separate name (script load), released again.
    const wh = await hw.hold('dlock-bench:held:warmup');
    await hw.release(wh);

    const rss0 = await settledRss();
    const heap0 = process.memoryUsage().heapUsed;
    const ta = nowNs();
    await forEachLimited(nLocks, inflight, async (i) => {
      handles[i] = await hw.hold(name(i));
    });
    const acquireS = Number(nowNs() - ta) / 1e9;
    const rss1 = await settledRss();
    const heap1 = process.memoryUsage().heapUsed;
    log(`held: ${nLocks} locks acquired in ${acquireS.toFixed(2)} s; holding ${periods} x ${periodMs} ms`);

    const cs0 = await commandStats(stats);
    counter.counts = {};
    counter.on = true;
    const cpu0 = process.cpuUsage();
    const t0 = nowNs();
    await sleep(periods * periodMs);
    const cpu1 = process.cpuUsage(cpu0);
    const windowS = Number(nowNs() - t0) / 1e9;
    counter.on = false;
    const cs1 = await commandStats(stats);

    const delta = diffCounts(cs0, cs1);
    delete delta.info;
    const total = Object.values(delta).reduce((a, b) => a + b, 0);
    const clientTotal = Object.values(counter.counts).reduce((a, b) => a + b, 0);

    // Which keys still exist (after the window, not counted above).
    let stillHeld = 0;
    for (let i = 0; i < nLocks; i += 1000) {
      const p = stats.pipeline();
      for (let j = i; j < Math.min(nLocks, i + 1000); j++) p.exists(redisKeyFor(ctx.peer, name(j)));
      for (const [err, v] of await p.exec()) if (!err && v === 1) stillHeld++;
    }

    const out = {
      locks: nLocks,
      periods,
      watchdog_ms: watchdogMs,
      period_ms: periodMs,
      window_s: r3(windowS),
      redis_commands_per_period: r1(total / periods),
      commands: delta,
      renewal_round_trips_per_period: r1(clientTotal / periods),
      client_commands: counter.counts,
      bytes_per_lock: r1((rss1 - rss0) / nLocks),
      heap_bytes_per_lock: r1((heap1 - heap0) / nLocks),
      hold_cpu_ms: r1((cpu1.user + cpu1.system) / 1000),
      acquire_s: r3(acquireS),
      locks_still_held: stillHeld,
      locks_lost_reported: hw.lostCount(),
      renewal: hw.config,
    };
    return out;
  } finally {
    await forEachLimited(nLocks, inflight, async (i) => {
      if (handles[i]) await hw.release(handles[i]).catch(() => {});
    });
    await hw.close();
    await stats.quit();
  }
}

module.exports = { run };
