#!/usr/bin/env node
'use strict';
// dlock benchmark: peer driver.
//
//   node bench/peers/bench.js --peer <node-redisson|redlock|redis-semaphore|redis-semaphore-sem> \
//        --scenario <uncontended|handoff|idle|many|held> --url redis://127.0.0.1:PORT [options]
//
// Prints exactly ONE line of JSON on stdout (diagnostics go to stderr) and
// exits 0; on failure prints a message on stderr and exits non-zero.
// See README.md in this directory for the full contract.

const { parseArgs, numOpt, log } = require('./lib/util');

const SCENARIOS = {
  uncontended: () => require('./lib/uncontended'),
  handoff: () => require('./lib/handoff'),
  idle: () => require('./lib/idle'),
  many: () => require('./lib/many'),
  held: () => require('./lib/held'),
};

const USAGE = `usage: node bench.js --peer <node-redisson|redlock|redis-semaphore|redis-semaphore-sem> --scenario <${Object.keys(SCENARIOS).join('|')}> --url redis://127.0.0.1:PORT [options]
  uncontended  --cycles N (20000) [--warmup N]
  handoff      --workers N (8) --mode threads|processes (threads) --seconds S (5) [--hold-ms 1]
  idle         --waiters N (7) --hold-ms MS (3000) [--settle-ms 500]
  many         --concurrency N (16) --names N (10000) --seconds S (5)
  held         --locks N (100000) --watchdog-ms MS (3000) --periods P (3) [--acquire-concurrency 64]
  polling peers: [--retry-delay-ms MS] [--retry-jitter-ms MS] (redlock retryDelay/retryJitter, redis-semaphore retryInterval)`;

// Errors that escape a peer library's own timers (e.g. a stale timeout firing
// on a closed connection) must not turn a finished run into a crash; before
// the result is printed they are fatal, after it they are only logged.
let resultPrinted = false;
let strays = 0;
function onStray(kind) {
  return (e) => {
    strays++;
    if (!resultPrinted) {
      process.stderr.write(`[bench] ${kind}: ${e && e.stack ? e.stack : e}\n[bench] failing the run\n`);
      process.exit(3);
    }
    if (strays <= 2) process.stderr.write(`[bench] ignored after the run, ${kind}: ${e && e.message ? e.message : e}\n`);
    else if (strays === 3) process.stderr.write('[bench] (further stray errors not shown)\n');
  };
}
process.on('unhandledRejection', onStray('unhandled rejection'));
process.on('uncaughtException', onStray('uncaught exception'));

async function main() {
  const argv = process.argv.slice(2);
  if (argv[0] === '--child') {
    resultPrinted = true; // children never print results
    if (argv[1] === 'handoff') return require('./lib/handoff').childMain();
    if (argv[1] === 'holder') return require('./lib/idle').holderMain();
    throw new Error(`unknown child role ${argv[1]}`);
  }
  const args = parseArgs(argv);
  if (args.help || args.h) {
    process.stderr.write(USAGE + '\n');
    process.exit(0);
  }
  for (const k of ['peer', 'scenario', 'url']) {
    if (typeof args[k] !== 'string') throw new Error(`--${k} is required\n${USAGE}`);
  }
  if (!SCENARIOS[args.scenario]) throw new Error(`unknown --scenario ${args.scenario}\n${USAGE}`);
  const peerOpts = { url: args.url };
  if (args.retryDelayMs !== undefined) peerOpts.retryDelayMs = numOpt(args, 'retryDelayMs', 0);
  if (args.retryJitterMs !== undefined) peerOpts.retryJitterMs = numOpt(args, 'retryJitterMs', 0);

  const { createPeer } = require('./lib/peers');
  const peer = createPeer(args.peer, peerOpts);
  const ctx = { peer: args.peer, peerOpts, forceExit: false };
  const scenario = SCENARIOS[args.scenario]();
  const t0 = Date.now();
  const result = await scenario.run(peer, args, ctx);
  const out = { peer: args.peer, scenario: args.scenario, ...result, config: peer.config };
  process.stdout.write(JSON.stringify(out) + '\n');
  resultPrinted = true;
  log(`${args.peer}/${args.scenario} done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  if (ctx.forceExit) process.exit(0);
  // Everything has been released and closed; the process should now exit by
  // itself. If some library keeps a handle open (a timer it never clears),
  // say so and exit anyway after a grace period.
  setTimeout(() => {
    const h = process._getActiveHandles ? process._getActiveHandles().map((x) => x.constructor.name) : [];
    log(`still alive 3 s after the result (open handles: ${h.join(', ') || 'timers'}); exiting`);
    process.exit(0);
  }, 3000).unref();
}

main().catch((e) => {
  process.stderr.write(`[bench] error: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
