'use strict';
// Scenario "idle": one holder (a child process, so its CPU is not counted)
// holds the lock while W waiters in this process (each with its own peer
// worker / connections) wait for it. Measured over a window of exactly
// --hold-ms, which starts after the waiters have settled into their wait
// (--settle-ms, default 500 ms after their acquire calls were issued):
//   - Redis commands processed: INFO stats total_commands_processed on a
//     separate plain connection just before and just after the window, minus
//     the one INFO call of ours that falls inside (the "before" INFO is
//     counted by Redis after its reply was built). Commands issued by Lua
//     scripts are included, as Redis counts them.
//   - waiter CPU: process.cpuUsage() of this process (user+system) across the
//     window. The holder's CPU is in another process.
// The holder keeps the lock for settle + window + a little, then releases;
// every waiter then acquires and releases once, and everything closes.

const { fork } = require('child_process');
const path = require('path');
const { intOpt, nowNs, sleep, statsConnection, totalCommandsProcessed, r1, r3, log } = require('./util');
const { createPeer } = require('./peers');

const LOCK_NAME = 'dlock-bench:idle';

async function run(peer, args, ctx) {
  const nWaiters = intOpt(args, 'waiters', 7);
  const holdMs = intOpt(args, 'holdMs', 3000);
  const settleMs = intOpt(args, 'settleMs', 500, { min: 0 });
  // After the holder releases, every waiter should get the lock once (and
  // release it at once). Waiters still blocked after --drain-ms have lost
  // their wake-up; they are reported and the run ends without them.
  const drainMs = intOpt(args, 'drainMs', 10000, { min: 0 });

  const benchJs = path.join(__dirname, '..', 'bench.js');
  const holder = fork(benchJs, ['--child', 'holder'], { stdio: ['ignore', 2, 2, 'ipc'] });
  const fromHolder = (type, ms) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`holder: no "${type}" within ${ms} ms`)), ms);
      const onMsg = (m) => {
        if (m.type === type) {
          clearTimeout(timer);
          holder.off('message', onMsg);
          resolve(m);
        } else if (m.type === 'error') {
          clearTimeout(timer);
          reject(new Error(`holder: ${m.message}`));
        }
      };
      holder.on('message', onMsg);
    });
  const stats = await statsConnection(ctx.peerOpts.url);
  const waiters = [];
  let blocked = 0;
  try {
    holder.send({ type: 'init', peer: ctx.peer, peerOpts: ctx.peerOpts, name: LOCK_NAME });
    await fromHolder('held', 30000);

    for (let k = 0; k < nWaiters; k++) {
      const w = await peer.newWorker();
      // warm-up on a private name (script loading etc.)
      const h = await w.acquire(`${LOCK_NAME}:warmup:${k}`);
      await w.release(h);
      waiters.push(w);
    }
    let done = 0;
    let failure = null;
    const acquired = waiters.map(async (w) => {
      try {
        const h = await w.acquire(LOCK_NAME);
        await w.release(h);
        done++;
      } catch (e) {
        failure = failure || e;
      }
    });
    await sleep(settleMs);

    const c0 = await totalCommandsProcessed(stats);
    const cpu0 = process.cpuUsage();
    const t0 = nowNs();
    await sleep(holdMs);
    const c1 = await totalCommandsProcessed(stats);
    const cpu1 = process.cpuUsage(cpu0);
    const measuredS = Number(nowNs() - t0) / 1e9;
    const cmds = c1 - c0 - 1;

    holder.send({ type: 'release' });
    await fromHolder('released', 30000);
    // Every waiter must now get the lock once; bound the drain.
    let timer;
    await Promise.race([Promise.all(acquired), new Promise((r) => (timer = setTimeout(r, drainMs)))]);
    clearTimeout(timer);
    if (failure) throw failure;
    blocked = nWaiters - done;
    const out = {
      waiters: nWaiters,
      hold_ms: holdMs,
      measured_s: r3(measuredS),
      redis_commands: cmds,
      redis_commands_per_s: r1(cmds / measuredS),
      waiter_cpu_ms: r1((cpu1.user + cpu1.system) / 1000),
      settle_ms: settleMs,
      blocked_after_release: blocked,
    };
    if (blocked > 0) {
      out.note =
        `${blocked} waiter(s) had not obtained the lock ${drainMs} ms after the holder released it ` +
        '(lost wake-ups after the measured window; the window itself is unaffected)';
      ctx.forceExit = true;
    }
    return out;
  } finally {
    // Waiters still blocked in acquire cannot be closed cleanly (their
    // acquire would fail on the closed connection); the process exits instead.
    if (blocked === 0) await Promise.all(waiters.map((w) => w.close()));
    await stats.quit();
    if (holder.exitCode === null) {
      await new Promise((r) => {
        const t = setTimeout(() => {
          holder.kill();
          r();
        }, 5000);
        holder.once('exit', () => {
          clearTimeout(t);
          r();
        });
        if (holder.connected) holder.send({ type: 'release' });
      });
    }
  }
}

// Child side: acquire, report "held", wait for "release", release, exit.
function holderMain() {
  let worker = null;
  let handle = null;
  process.on('message', async (m) => {
    try {
      if (m.type === 'init') {
        const peer = createPeer(m.peer, m.peerOpts);
        worker = await peer.newWorker();
        handle = await worker.acquire(m.name);
        process.send({ type: 'held' });
      } else if (m.type === 'release') {
        if (handle) {
          const h = handle;
          handle = null;
          await worker.release(h);
        }
        if (worker) await worker.close();
        worker = null;
        process.send({ type: 'released' }, () => process.disconnect());
      }
    } catch (e) {
      process.stderr.write(`[bench holder ${process.pid}] ${e && e.stack ? e.stack : e}\n`);
      try {
        process.send({ type: 'error', message: String(e && e.message ? e.message : e) }, () => process.exit(1));
      } catch {
        process.exit(1);
      }
    }
  });
}

module.exports = { run, holderMain };
