'use strict';
// Shared helpers for the peer drivers: argument parsing, clocks, statistics,
// Redis INFO readers, a small concurrency limiter, GC access.

const Redis = require('ioredis');

// ---------------------------------------------------------------- arguments

// Parses "--name value" pairs (and bare "--flag") into an object with
// camelCased keys. Unknown options are kept; each scenario reads what it needs.
function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Error(`unexpected argument: ${a}`);
    let key = a.slice(2);
    let val;
    const eq = key.indexOf('=');
    if (eq >= 0) {
      val = key.slice(eq + 1);
      key = key.slice(0, eq);
    } else if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) {
      val = argv[++i];
    } else {
      val = true;
    }
    out[key.replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = val;
  }
  return out;
}

function intOpt(args, key, def, { min = 1 } = {}) {
  if (args[key] === undefined) return def;
  const v = Number(args[key]);
  if (!Number.isInteger(v) || v < min) {
    throw new Error(`--${key.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase())} must be an integer >= ${min}, got ${args[key]}`);
  }
  return v;
}

function numOpt(args, key, def, { min = 0 } = {}) {
  if (args[key] === undefined) return def;
  const v = Number(args[key]);
  if (!Number.isFinite(v) || v < min) {
    throw new Error(`--${key.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase())} must be a number >= ${min}, got ${args[key]}`);
  }
  return v;
}

// ------------------------------------------------------------------- clocks

// process.hrtime.bigint() is CLOCK_MONOTONIC on Linux, so values taken in
// different processes on the same machine are comparable.
const nowNs = () => process.hrtime.bigint();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// --------------------------------------------------------------- statistics

// Nearest-rank percentile over a sorted numeric array (p in [0,100]).
function percentileSorted(sorted, p) {
  if (sorted.length === 0) return null;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

function sortedCopy(arr) {
  const a = Float64Array.from(arr);
  a.sort();
  return a;
}

const r1 = (x) => (x === null || x === undefined ? null : Math.round(x * 10) / 10);
const r3 = (x) => (x === null || x === undefined ? null : Math.round(x * 1000) / 1000);

// ------------------------------------------------------------ redis helpers

function redisOptionsFromUrl(url) {
  const u = new URL(url);
  if (u.protocol !== 'redis:') throw new Error(`only redis:// URLs are supported, got ${url}`);
  const o = {
    host: u.hostname || '127.0.0.1',
    port: u.port ? Number(u.port) : 6379,
  };
  if (u.username) o.username = decodeURIComponent(u.username);
  if (u.password) o.password = decodeURIComponent(u.password);
  const db = u.pathname && u.pathname.length > 1 ? Number(u.pathname.slice(1)) : 0;
  if (db) o.db = db;
  return o;
}

// A plain ioredis connection for measurements (INFO); never used by a peer.
async function statsConnection(url) {
  const c = new Redis({ ...redisOptionsFromUrl(url), lazyConnect: true, enableReadyCheck: false });
  await c.connect();
  return c;
}

function parseInfo(text) {
  const out = {};
  for (const line of text.split(/\r?\n/)) {
    if (!line || line[0] === '#') continue;
    const i = line.indexOf(':');
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

async function totalCommandsProcessed(conn) {
  const info = parseInfo(await conn.info('stats'));
  return Number(info.total_commands_processed);
}

// Returns { command: calls } from INFO commandstats. Commands issued by Lua
// scripts (redis.call) are counted by Redis under their own names too.
async function commandStats(conn) {
  const info = parseInfo(await conn.info('commandstats'));
  const out = {};
  for (const [k, v] of Object.entries(info)) {
    if (!k.startsWith('cmdstat_')) continue;
    const m = /calls=(\d+)/.exec(v);
    if (m) out[k.slice('cmdstat_'.length)] = Number(m[1]);
  }
  return out;
}

function diffCounts(before, after) {
  const out = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] || 0);
    if (d) out[k] = d;
  }
  return out;
}

// Counts every command a given ioredis connection sends (one per round trip:
// EVALSHA counts once, not its inner redis.call()s).
function instrumentConnection(conn, counter) {
  if (conn.__benchCounted) return;
  conn.__benchCounted = true;
  const orig = conn.sendCommand;
  conn.sendCommand = function (command, stream) {
    if (counter.on) {
      const n = String(command.name).toLowerCase();
      counter.counts[n] = (counter.counts[n] || 0) + 1;
    }
    return orig.call(this, command, stream);
  };
}

// --------------------------------------------------------------- concurrency

// Runs fn(i) for i in [0, n) with at most `limit` in flight.
async function forEachLimited(n, limit, fn) {
  let next = 0;
  let failed = null;
  async function lane() {
    while (failed === null && next < n) {
      const i = next++;
      try {
        await fn(i);
      } catch (e) {
        failed = e;
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, n) }, lane));
  if (failed) throw failed;
}

// ------------------------------------------------------------------------ gc

let gcFn = null;
function getGc() {
  if (gcFn) return gcFn;
  if (typeof global.gc === 'function') {
    gcFn = global.gc;
  } else {
    // Fallback when node was not started with --expose-gc.
    require('v8').setFlagsFromString('--expose-gc');
    gcFn = require('vm').runInNewContext('gc');
  }
  return gcFn;
}

async function settledRss() {
  const gc = getGc();
  for (let i = 0; i < 3; i++) {
    gc();
    await sleep(50);
  }
  return process.memoryUsage().rss;
}

function log(...a) {
  process.stderr.write(`[bench] ${a.join(' ')}\n`);
}

module.exports = {
  parseArgs,
  intOpt,
  numOpt,
  nowNs,
  sleep,
  percentileSorted,
  sortedCopy,
  r1,
  r3,
  redisOptionsFromUrl,
  statsConnection,
  parseInfo,
  totalCommandsProcessed,
  commandStats,
  diffCounts,
  instrumentConnection,
  forEachLimited,
  getGc,
  settledRss,
  log,
};
