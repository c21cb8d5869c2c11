'use strict';
// Scenario "many": C concurrent workers (async tasks in one process, each with
// its own connection(s)) over K distinct names without contention: worker k
// uses names k, k+C, k+2C, ... (wrapping). Acquire+release as fast as possible
// for S seconds.

const { intOpt, numOpt, nowNs, r1, log } = require('./util');

async function run(peer, args) {
  const concurrency = intOpt(args, 'concurrency', 16);
  const nNames = intOpt(args, 'names', 10000);
  const seconds = numOpt(args, 'seconds', 5, { min: 0.1 });
  if (nNames < concurrency) throw new Error('--names must be >= --concurrency');
  const name = (i) => `dlock-bench:many:${i}`;

  const workers = [];
  try {
    for (let k = 0; k < concurrency; k++) workers.push(await peer.newWorker());
    // Warm-up: a few cycles per worker on its own names.
    await Promise.all(
      workers.map(async (w, k) => {
        for (let j = 0; j < 20; j++) {
          const h = await w.acquire(name((k + j * concurrency) % nNames));
          await w.release(h);
        }
      }),
    );
    log(`many: ${concurrency} workers ready, running ${seconds}s over ${nNames} names`);
    const t0 = nowNs();
    const deadline = t0 + BigInt(Math.round(seconds * 1e9));
    const counts = await Promise.all(
      workers.map(async (w, k) => {
        let n = 0;
        let idx = k;
        while (nowNs() < deadline) {
          const h = await w.acquire(name(idx));
          await w.release(h);
          n++;
          idx += concurrency;
          if (idx >= nNames) idx = k;
        }
        return n;
      }),
    );
    const elapsed = Number(nowNs() - t0) / 1e9;
    const cycles = counts.reduce((a, b) => a + b, 0);
    return {
      concurrency,
      names: nNames,
      cycles,
      seconds: Math.round(elapsed * 1000) / 1000,
      cycles_per_s: r1(cycles / elapsed),
    };
  } finally {
    await Promise.all(workers.map((w) => w.close()));
  }
}

module.exports = { run };
