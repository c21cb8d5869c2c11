'use strict';
// Scenario "held": acquire N distinct names with the peer's auto-renewal
// configured for a renewal period of ~MS/3 (see peers.js newHeldWorker for
// how each peer is set up), then hold them for P renewal periods.
//
// Measured (in one attempt, see below):
//   - bytes_per_lock: (RSS after acquiring all - RSS before) / N, each RSS
//     read after three forced GCs (global.gc with --expose-gc, or V8's gc
//     exposed at run time). heap_bytes_per_lock (V8 heapUsed) for reference.
//   - Redis side: INFO commandstats just before and just after the hold
//     window; the sum of calls of every command except INFO, per period.
//     Commands that scripts run (redis.call) are counted by Redis under their
//     own names, so one renewal script shows up as EVALSHA plus its inner
//     commands. "commands" lists the per-command deltas (INFO left out).
//     Per period = total / (window_s / period), window_s being the real time
//     from sending the first INFO to receiving the second: P periods plus two
//     round trips when the event loop is healthy, longer when the peer
//     overloads it (then dividing by the nominal P would inflate the figure).
//   - renewal_round_trips_per_period: commands the peer's own ioredis
//     connection(s) sent during the window (counted client-side by wrapping
//     sendCommand; nothing but renewals happens then), per period. ioredis
//     names a script call "evalsha" here even when it sends it as EVAL (the
//     first time on a connection).
//   - hold_cpu_ms: process.cpuUsage() (user+system) across the window.
//   - afterwards: how many of the N keys still exist (EXISTS, batched) and
//     how many losses the peer itself reported.
//
// Attempts and step-down: each attempt runs in a fresh child process (so a
// failed bigger attempt does not inflate the next one's RSS baseline). An
// attempt fails as soon as a lock is seen lost (sampled every 500 ms while
// acquiring, fully checked after the window), or if during the window the
// peer renewed fewer than 90 % of the locks per period: its renewals did not
// keep up. Unless --no-fallback is given, the driver then retries with half the
// locks (rounded down to a multiple of 1000, not below 1000) and says so in
// "note"; "locks" is the size of the attempt reported, "locks_requested" the
// size asked for, "attempts" the sizes tried.

const path = require('path');
const { spawn } = require('child_process');
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

const ACQUIRE_CAP_S = 180; // an attempt whose acquisition phase takes longer fails

async function existCount(conn, peerName, indexes) {
  let n = 0;
  for (let i = 0; i < indexes.length; i += 1000) {
    const p = conn.pipeline();
    for (let j = i; j < Math.min(indexes.length, i + 1000); j++) p.exists(redisKeyFor(peerName, heldName(indexes[j])));
    for (const [err, v] of await p.exec()) if (!err && v === 1) n++;
  }
  return n;
}

const heldName = (i) => `dlock-bench:held:${i}`;

async function attempt(peer, args, ctx) {
  const nLocks = intOpt(args, 'locks', 100000);
  const watchdogMs = intOpt(args, 'watchdogMs', 3000, { min: 300 });
  const periods = intOpt(args, 'periods', 3);
  const inflight = intOpt(args, 'acquireConcurrency', 64);
  const periodMs = Math.floor(watchdogMs / 3);

  const stats = await statsConnection(ctx.peerOpts.url);
  const hw = await peer.newHeldWorker(watchdogMs);
  const counter = { on: false, counts: {} };
  for (const c of hw.connections) instrumentConnection(c, counter);
  const handles = new Array(nLocks);
  let acquired = 0;
  const base = {
    locks: nLocks,
    periods,
    watchdog_ms: watchdogMs,
    period_ms: periodMs,
  };
  try {
    // Warm-up: one lock on a separate name, held long enough for one renewal
    // (so acquire, renew and release scripts are all loaded), then released.
    const wh = await hw.hold('dlock-bench:held:warmup');
    await sleep(periodMs + 200);
    await hw.release(wh);

    const rss0 = await settledRss();
    const heap0 = process.memoryUsage().heapUsed;
    const ta = nowNs();

    // Loss sampler during the acquisition phase.
    let lostSeen = null;
    let sampling = true;
    const sampler = (async () => {
      while (sampling && lostSeen === null) {
        await sleep(500);
        if (!sampling) break;
        const upTo = acquired;
        if (upTo === 0) continue;
        const idx = [];
        for (let k = 0; k < Math.min(200, upTo); k++) idx.push(Math.floor((k * upTo) / Math.min(200, upTo)));
        const present = await existCount(stats, ctx.peer, idx.filter((i) => handles[i]));
        const missing = idx.filter((i) => handles[i]).length - present;
        const lost = hw.lostCount() || 0;
        if (missing > 0 || lost > 0) lostSeen = { acquired: upTo, missing_in_sample: missing, lost_reported: lost };
        else if (Number(nowNs() - ta) / 1e9 > ACQUIRE_CAP_S) lostSeen = { acquired: upTo, reason: `acquisition took over ${ACQUIRE_CAP_S} s` };
      }
    })();
    await forEachLimited(nLocks, inflight, async (i) => {
      if (lostSeen) throw new Error('stop');
      handles[i] = await hw.hold(heldName(i));
      acquired++;
    }).catch((e) => {
      if (!lostSeen) throw e;
    });
    sampling = false;
    await sampler;
    const acquireS = Number(nowNs() - ta) / 1e9;
    if (lostSeen) {
      log(`held: ${nLocks} locks: lost locks while acquiring (${JSON.stringify(lostSeen)}) after ${acquireS.toFixed(1)} s`);
      return { ...base, complete: false, failure: { phase: 'acquire', after_s: r3(acquireS), ...lostSeen } };
    }
    const rss1 = await settledRss();
    const heap1 = process.memoryUsage().heapUsed;
    log(`held: ${nLocks} locks acquired in ${acquireS.toFixed(2)} s; holding ${periods} x ${periodMs} ms`);

    const w0 = nowNs();
    const cs0 = await commandStats(stats);
    counter.counts = {};
    counter.on = true;
    const cpu0 = process.cpuUsage();
    const t0 = nowNs();
    await sleep(periods * periodMs);
    const cpu1 = process.cpuUsage(cpu0);
    const holdS = Number(nowNs() - t0) / 1e9;
    counter.on = false;
    const cs1 = await commandStats(stats);
    const windowS = Number(nowNs() - w0) / 1e9;

    const delta = diffCounts(cs0, cs1);
    delete delta.info;
    const total = Object.values(delta).reduce((a, b) => a + b, 0);
    const clientTotal = Object.values(counter.counts).reduce((a, b) => a + b, 0);
    // Per period: the deltas are divided by the number of periods that the
    // window really lasted (window_s / period). With a healthy event loop
    // that is P to within a few ms (0.1 %); when the peer overloads the event
    // loop the timer that ends the window fires late, and dividing by the
    // nominal P would inflate the per-period figures.
    const periodsInWindow = (windowS * 1000) / periodMs;
    const periodsInHold = (holdS * 1000) / periodMs;
    const renewalsPerPeriod = clientTotal / periodsInHold;

    const stillHeld = await existCount(
      stats,
      ctx.peer,
      Array.from({ length: nLocks }, (_, i) => i),
    );
    const lostReported = hw.lostCount();
    // Held = none lost AND renewals kept (nearly) the configured period.
    const behind = renewalsPerPeriod < 0.9 * nLocks;
    const complete = stillHeld === nLocks && !lostReported && !behind;
    let failure = null;
    if (stillHeld !== nLocks || lostReported) {
      failure = { phase: 'hold', expired: nLocks - stillHeld, lost_reported: lostReported };
    } else if (behind) {
      failure = { phase: 'hold', reason: 'renewals fell behind the period', renewals_per_period: r1(renewalsPerPeriod) };
    }
    if (failure) log(`held: ${nLocks} locks: ${JSON.stringify(failure)}`);
    return {
      ...base,
      complete,
      ...(failure ? { failure } : {}),
      window_s: r3(windowS),
      redis_commands_per_period: r1(total / periodsInWindow),
      redis_commands_total: total,
      commands: delta,
      renewal_round_trips_per_period: r1(renewalsPerPeriod),
      client_commands: counter.counts,
      bytes_per_lock: r1((rss1 - rss0) / nLocks),
      heap_bytes_per_lock: r1((heap1 - heap0) / nLocks),
      hold_cpu_ms: r1((cpu1.user + cpu1.system) / 1000),
      acquire_s: r3(acquireS),
      locks_still_held: stillHeld,
      locks_lost_reported: lostReported,
      renewal: hw.config,
    };
  } finally {
    // Releasing a lock that already expired is an error in some peers; ignore.
    await forEachLimited(nLocks, inflight, async (i) => {
      if (handles[i]) await hw.release(handles[i]).catch(() => {});
    });
    await hw.close();
    await stats.quit();
  }
}

// Runs one attempt in a fresh child process and returns its parsed JSON.
function attemptInChild(args, ctx, nLocks) {
  const argv = ['--expose-gc', path.join(__dirname, '..', 'bench.js')];
  argv.push('--peer', ctx.peer, '--scenario', 'held', '--url', ctx.peerOpts.url, '--no-fallback');
  argv.push('--locks', String(nLocks));
  for (const k of ['watchdog-ms', 'periods', 'acquire-concurrency', 'retry-delay-ms', 'retry-jitter-ms']) {
    const key = k.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (args[key] !== undefined) argv.push(`--${k}`, String(args[key]));
  }
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    c.stdout.on('data', (d) => (out += d));
    c.on('error', reject);
    c.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`held attempt with --locks ${nLocks} exited with code ${code}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()));
      } catch (e) {
        reject(new Error(`held attempt with --locks ${nLocks}: unparsable output: ${out.slice(0, 200)}`));
      }
    });
  });
}

async function run(peer, args, ctx) {
  if (args.noFallback) return attempt(peer, args, ctx);
  const requested = intOpt(args, 'locks', 100000);
  const tried = [];
  let n = requested;
  for (;;) {
    const res = await attemptInChild(args, ctx, n);
    delete res.peer;
    delete res.scenario;
    delete res.config;
    tried.push({ locks: n, complete: res.complete, ...(res.failure ? { failure: res.failure } : {}) });
    const next = Math.floor(n / 2 / 1000) * 1000;
    if (res.complete || next < 1000) {
      const out = { ...res, locks_requested: requested, attempts: tried };
      if (!res.complete) {
        out.note = `could not hold even ${n} locks with renewal every ${res.period_ms} ms: the peer lost locks (see attempts)`;
      } else if (n !== requested) {
        out.note =
          `could not hold ${requested} locks with renewal every ${res.period_ms} ms on this machine: ` +
          `locks expired because the peer's renewals fell behind (see attempts); result is for ${n} locks`;
      }
      return out;
    }
    log(`held: ${n} locks failed, retrying with ${next}`);
    // let the failed attempt's leftover keys expire before the next attempt
    await sleep(intOpt(args, 'watchdogMs', 3000, { min: 300 }) + 500);
    n = next;
  }
}

module.exports = { run };
