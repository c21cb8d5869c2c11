'use strict';
// Scenario "uncontended": one worker, one lock name, acquire + release N
// times in sequence after a short warm-up. Latency = one acquire+release cycle.

const { intOpt, nowNs, sortedCopy, percentileSorted, r1, log } = require('./util');

async function run(peer, args) {
  const cycles = intOpt(args, 'cycles', 20000);
  const warmup = intOpt(args, 'warmup', Math.min(1000, Math.max(100, Math.floor(cycles / 10))), { min: 0 });
  const name = 'dlock-bench:uncontended';

  const w = await peer.newWorker();
  try {
    for (let i = 0; i < warmup; i++) {
      const h = await w.acquire(name);
      await w.release(h);
    }
    log(`uncontended: warm-up ${warmup} cycles done, measuring ${cycles}`);
    const lat = new Float64Array(cycles);
    const t0 = nowNs();
    for (let i = 0; i < cycles; i++) {
      const a = nowNs();
      const h = await w.acquire(name);
      await w.release(h);
      lat[i] = Number(nowNs() - a) / 1000;
    }
    const seconds = Number(nowNs() - t0) / 1e9;
    const s = sortedCopy(lat);
    return {
      cycles,
      seconds: Math.round(seconds * 1000) / 1000,
      cycles_per_s: r1(cycles / seconds),
      p50_us: r1(percentileSorted(s, 50)),
      p99_us: r1(percentileSorted(s, 99)),
      p999_us: r1(percentileSorted(s, 99.9)),
      warmup_cycles: warmup,
    };
  } finally {
    await w.close();
  }
}

module.exports = { run };
