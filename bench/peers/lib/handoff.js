'use strict';
// Scenario "handoff": W workers on ONE name. Each holds the lock ~1 ms
// (setTimeout(1)), releases it, and then waits until ANOTHER worker has
// acquired it before trying again, so every acquisition is the wake-up of a
// waiter (no worker can barge back in on its own release).
//
// mode "threads":   W async tasks in this process, each with its own peer
//                   worker (own Redis connection(s)); "another worker holds it
//                   now" is signalled in memory.
// mode "processes": W child processes (child_process.fork of bench.js
//                   --child handoff); each acquisition is reported to the
//                   parent over IPC and relayed to the other children.
//
// Every worker records, per acquisition: when its acquire call started (t0),
// when acquire returned (ta) and when release returned (tr), all from
// process.hrtime.bigint() (CLOCK_MONOTONIC, comparable across processes),
// relative to a common base chosen by the parent. The parent merges all
// records, sorts by ta, and the handoff gap of acquisition i+1 is
// ta[i+1] - tr[i]. The time release was called (tq) is recorded too, for a
// safety check: "overlaps" counts acquisitions that returned before the
// previous holder had called release (must be 0). Only acquisitions with ta inside [0, S] are counted;
// after S the workers stop trying, the ones still blocked in acquire drain.

const { fork } = require('child_process');
const path = require('path');
const { intOpt, numOpt, nowNs, sleep, sortedCopy, percentileSorted, r1, log } = require('./util');
const { createPeer } = require('./peers');

const LOCK_NAME = 'dlock-bench:handoff';
// After S the workers stop; those still blocked in acquire get --drain-ms
// (default 10 000 ms) to obtain the lock once more. A worker still blocked
// after that has lost a wake-up: its wait so far (a lower bound) is counted
// in waits_over_1s / max_wait_ms, it is reported in blocked_at_end, and the
// run ends without waiting for it (its acquire cannot be cancelled).
const DEFAULT_DRAIN_MS = 10000;

// "another worker holds it now" bookkeeping for one worker set.
// maxOther[w] = latest acquisition time (relative ns) by a worker other than w.
function makeGate(n, durationNs, rel) {
  const maxOther = new Array(n).fill(-Infinity);
  const waiting = new Array(n).fill(null);
  function note(w, t) {
    if (t > maxOther[w]) maxOther[w] = t;
    const wt = waiting[w];
    if (wt && maxOther[w] > wt.after) {
      waiting[w] = null;
      wt.wake();
    }
  }
  function waitOther(w, after) {
    if (maxOther[w] > after) return Promise.resolve();
    const remainingMs = (durationNs - rel()) / 1e6;
    if (remainingMs <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        waiting[w] = null;
        resolve();
      }, Math.ceil(remainingMs));
      waiting[w] = {
        after,
        wake() {
          clearTimeout(timer);
          resolve();
        },
      };
    });
  }
  return { note, waitOther };
}

// rec collects this worker's acquisitions; rec.pending is the start time of
// an acquire call still in flight (null otherwise), so that a worker still
// blocked when the drain ends can be reported.
async function workerLoop({ worker, index, rel, durationNs, holdMs, publish, waitOther, rec }) {
  const { t0s, tas, tqs, trs } = rec;
  while (rel() < durationNs) {
    const t0 = rel();
    rec.pending = t0;
    const h = await worker.acquire(LOCK_NAME);
    const ta = rel();
    rec.pending = null;
    publish(index, ta);
    await sleep(holdMs);
    const tq = rel();
    await worker.release(h);
    const tr = rel();
    t0s.push(t0);
    tas.push(ta);
    tqs.push(tq);
    trs.push(tr);
    await waitOther(index, ta);
  }
  return rec;
}

const newRec = () => ({ t0s: [], tas: [], tqs: [], trs: [], pending: null });

// A timer that can be cancelled (so that it does not keep the process alive).
function timeout(ms) {
  let timer;
  const p = new Promise((resolve) => (timer = setTimeout(() => resolve('timeout'), ms)));
  p.cancel = () => clearTimeout(timer);
  return p;
}

async function warmUp(worker, index) {
  // Loads scripts / opens subscriptions paths on a private name.
  for (let i = 0; i < 5; i++) {
    const h = await worker.acquire(`${LOCK_NAME}:warmup:${index}`);
    await worker.release(h);
  }
}

// ---------------------------------------------------------------- threads

async function runThreads(peer, n, durationNs, holdMs, drainMs) {
  const workers = [];
  for (let k = 0; k < n; k++) workers.push(await peer.newWorker());
  await Promise.all(workers.map((w, k) => warmUp(w, k)));
  const base = nowNs() + 20_000_000n;
  const rel = () => Number(nowNs() - base);
  const gate = makeGate(n, durationNs, rel);
  const publish = (w, t) => {
    for (let k = 0; k < n; k++) if (k !== w) gate.note(k, t);
  };
  await sleep(Math.max(0, -rel() / 1e6));
  const recs = workers.map(() => newRec());
  let failure = null;
  const finished = new Array(n).fill(false);
  const loops = workers.map((worker, index) =>
    workerLoop({ worker, index, rel, durationNs, holdMs, publish, waitOther: gate.waitOther, rec: recs[index] }).then(
      () => (finished[index] = true),
      (err) => (failure = failure || err),
    ),
  );
  const cap = timeout(durationNs / 1e6 + drainMs);
  await Promise.race([Promise.all(loops), cap]);
  cap.cancel();
  if (failure) throw failure;
  const endRel = rel();
  const blocked = finished.filter((f) => !f).length;
  if (blocked === 0) await Promise.all(workers.map((w) => w.close()));
  return { records: recs, endRel, blocked, forceExit: blocked > 0 };
}

// -------------------------------------------------------------- processes

async function runProcesses(ctx, n, durationNs, holdMs, drainMs) {
  const children = [];
  const benchJs = path.join(__dirname, '..', 'bench.js');
  const done = new Array(n).fill(null);
  let failure = null;
  let onChange = () => {};
  let ready = 0;
  // IPC sends never throw: a child that already finished may have closed its
  // channel while a relayed message was on its way.
  const send = (c, m) => {
    if (c.connected) c.send(m, () => {});
  };
  for (let k = 0; k < n; k++) {
    const c = fork(benchJs, ['--child', 'handoff'], { stdio: ['ignore', 2, 2, 'ipc'] });
    children.push(c);
    c.on('error', () => {});
    c.on('message', (m) => {
      if (m.type === 'ready') ready++;
      else if (m.type === 'acq') {
        for (let j = 0; j < n; j++) if (j !== m.w) send(children[j], m);
      } else if (m.type === 'done') done[k] = m.rec;
      else if (m.type === 'error') failure = failure || new Error(`child ${k}: ${m.message}`);
      onChange();
    });
    c.on('exit', (code) => {
      if (!done[k] && code !== 0) failure = failure || new Error(`child ${k} exited with code ${code}`);
      onChange();
    });
    send(c, { type: 'init', peer: ctx.peer, peerOpts: ctx.peerOpts, index: k, n, durationNs, holdMs });
  }
  const until = (pred, ms) =>
    new Promise((resolve) => {
      const timer = setTimeout(() => {
        onChange = () => {};
        resolve(false);
      }, ms);
      onChange = () => {
        if (pred()) {
          clearTimeout(timer);
          onChange = () => {};
          resolve(true);
        }
      };
      onChange();
    });
  const killAll = () => children.forEach((c) => c.exitCode === null && c.signalCode === null && c.kill());
  if (!(await until(() => failure || ready === n, 60000)) || failure) {
    killAll();
    throw failure || new Error('children did not become ready within 60 s');
  }
  const base = nowNs() + 100_000_000n; // all children start together, 100 ms from now
  for (const c of children) send(c, { type: 'start', base: base.toString() });
  const allDone = await until(() => failure || done.every((d) => d), 100 + durationNs / 1e6 + drainMs);
  if (failure) {
    killAll();
    throw failure;
  }
  let endRel = Number(nowNs() - base);
  let blocked = 0;
  if (!allDone) {
    // Ask the children still blocked for what they have (including the start
    // of the acquire they are stuck in), then stop them.
    endRel = Number(nowNs() - base);
    children.forEach((c, k) => !done[k] && send(c, { type: 'snapshot' }));
    await until(() => done.every((d) => d), 5000);
    blocked = done.filter((d) => !d || d.pending !== null).length;
    killAll();
  }
  return { records: done.filter((d) => d), endRel, blocked, forceExit: false };
}

// Child side of "processes" mode.
function childMain() {
  let state = null;
  const finish = (rec) => process.send({ type: 'done', rec }, () => process.exit(0));
  process.on('message', async (m) => {
    try {
      if (m.type === 'init') {
        const peer = createPeer(m.peer, m.peerOpts);
        const worker = await peer.newWorker();
        await warmUp(worker, m.index);
        state = { m, worker, gate: null, rec: newRec() };
        process.send({ type: 'ready' });
      } else if (m.type === 'start') {
        const base = BigInt(m.base);
        const rel = () => Number(nowNs() - base);
        const { index, n, durationNs, holdMs } = state.m;
        state.gate = makeGate(n, durationNs, rel);
        await sleep(Math.max(0, -rel() / 1e6));
        const publish = (w, t) => process.send({ type: 'acq', w, t }, () => {});
        await workerLoop({
          worker: state.worker,
          index,
          rel,
          durationNs,
          holdMs,
          publish,
          waitOther: state.gate.waitOther,
          rec: state.rec,
        });
        await state.worker.close();
        // Exit explicitly: a peer may leave timers behind (node-redisson's
        // per-wait timeouts are never cleared).
        finish(state.rec);
      } else if (m.type === 'acq') {
        if (state && state.gate) state.gate.note(state.m.index, m.t);
      } else if (m.type === 'snapshot') {
        finish(state.rec);
      }
    } catch (e) {
      process.stderr.write(`[bench child ${process.pid}] ${e && e.stack ? e.stack : e}\n`);
      try {
        process.send({ type: 'error', message: String(e && e.message ? e.message : e) }, () => process.exit(1));
      } catch {
        process.exit(1);
      }
    }
  });
}

// ---------------------------------------------------------------- analysis

function analyze(records, durationNs, endRel) {
  const all = [];
  const pendingWaitsMs = [];
  for (const r of records) {
    for (let i = 0; i < r.tas.length; i++) all.push({ t0: r.t0s[i], ta: r.tas[i], tq: r.tqs[i], tr: r.trs[i] });
    if (r.pending !== null && r.pending !== undefined) pendingWaitsMs.push((endRel - r.pending) / 1e6);
  }
  all.sort((a, b) => a.ta - b.ta);
  const win = all.filter((x) => x.ta >= 0 && x.ta <= durationNs);
  const gaps = [];
  let negative = 0;
  for (let i = 0; i + 1 < win.length; i++) {
    const g = (win[i + 1].ta - win[i].tr) / 1000;
    if (g < 0) negative++;
    gaps.push(g);
  }
  // Safety check: an acquisition that returned before the previous holder
  // had even CALLED release would be two holders at once.
  let overlaps = 0;
  for (let i = 0; i + 1 < all.length; i++) if (all[i + 1].ta < all[i].tq) overlaps++;
  // Waits of completed acquire calls plus, as lower bounds, those still
  // blocked when the run ended.
  const waitsMs = all.map((x) => (x.ta - x.t0) / 1e6).concat(pendingWaitsMs);
  const gs = sortedCopy(gaps);
  return {
    acquisitions: win.length,
    acq_per_s: r1(win.length / (durationNs / 1e9)),
    gap_p50_us: r1(percentileSorted(gs, 50)),
    gap_p99_us: r1(percentileSorted(gs, 99)),
    gap_max_us: gs.length ? r1(gs[gs.length - 1]) : null,
    gap_min_us: gs.length ? r1(gs[0]) : null,
    waits_over_1s: waitsMs.filter((w) => w > 1000).length,
    max_wait_ms: r1(waitsMs.reduce((a, b) => Math.max(a, b), 0)),
    gaps_negative: negative,
    overlaps,
    acquisitions_incl_drain: all.length,
  };
}

async function run(peer, args, ctx) {
  const n = intOpt(args, 'workers', 8, { min: 2 });
  const mode = args.mode === undefined ? 'threads' : String(args.mode);
  if (mode !== 'threads' && mode !== 'processes') throw new Error('--mode must be threads or processes');
  const seconds = numOpt(args, 'seconds', 5, { min: 0.1 });
  const holdMs = numOpt(args, 'holdMs', 1, { min: 0 });
  const drainMs = intOpt(args, 'drainMs', DEFAULT_DRAIN_MS, { min: 0 });
  const durationNs = Math.round(seconds * 1e9);
  log(`handoff: ${n} workers, mode ${mode}, ${seconds}s`);
  const res =
    mode === 'threads'
      ? await runThreads(peer, n, durationNs, holdMs, drainMs)
      : await runProcesses(ctx, n, durationNs, holdMs, drainMs);
  const out = { workers: n, mode, seconds, hold_ms: holdMs, ...analyze(res.records, durationNs, res.endRel) };
  out.blocked_at_end = res.blocked;
  if (res.blocked > 0) {
    out.note =
      `${res.blocked} worker(s) were still blocked in acquire ${drainMs} ms after the end of the run ` +
      '(lost wake-up); their wait so far is counted as a lower bound in waits_over_1s/max_wait_ms';
  }
  if (res.forceExit) ctx.forceExit = true;
  return out;
}

module.exports = { run, childMain };
