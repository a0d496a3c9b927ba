'use strict';
// node-redis 6 (RESP3 by default, HELLO 3 with no fallback) against
// redlock-proxy, driven by tests/interop_node_test.go.
//
//   node noderedis.js contend  <proxy host:port> <backends> <key> <rounds> <hold-ms> <start-at-epoch-ms>
//   node noderedis.js scenario <proxy host:port> <backends> <key>
//
// Prints one JSON object. process.hrtime.bigint() is CLOCK_MONOTONIC.

const crypto = require('crypto');
const { createClient } = require('redis');
const { sleep, now, holders, holdersSettled, waitExpired } = require('./common');

async function connect(addr, opts) {
  const c = createClient({ url: 'redis://' + addr, ...opts });
  c.on('error', () => {});
  await c.connect();
  return c;
}

const token = () => crypto.randomBytes(16).toString('hex');

// acquire spins on SET NX PX, as hand-written node locks do.
async function acquire(c, key, value, ttl, deadline) {
  while (Date.now() < deadline) {
    if ((await c.set(key, value, { expiration: { type: 'PX', value: ttl }, condition: 'NX' })) === 'OK') return true;
    await sleep(5 + Math.random() * 10);
  }
  return false;
}

async function contend(proxy, backends, key, rounds, holdMs, startAt) {
  const delay = startAt - Date.now();
  if (delay > 0) await sleep(delay);
  const windows = [];
  let minHolders = null;
  for (let i = 0; i < rounds; i++) {
    const v = token();
    if (!(await acquire(proxy, key, v, 20000, Date.now() + 20000))) return { error: 'SET NX PX did not succeed within 20s' };
    const start = now();
    const h = await holders(backends, key, v);
    minHolders = minHolders === null ? h : Math.min(minHolders, h);
    // Renew the way Redis 8.4 clients do.
    const renewed = await proxy.set(key, v, { expiration: { type: 'PX', value: 20000 }, condition: 'IFEQ', matchValue: v });
    if (renewed !== 'OK') return { error: 'SET k v PX 20000 IFEQ v while held returned ' + JSON.stringify(renewed) };
    await sleep(holdMs);
    const end = now();
    const released = await proxy.sendCommand(['DELIFEQ', key, v]);
    if (released !== 1) return { error: 'DELIFEQ while held returned ' + JSON.stringify(released) };
    windows.push([start, end]);
    await sleep(holdMs); // let the others in before trying again
  }
  return { windows, min_holders: minHolders };
}

async function result(p) {
  try {
    return await p;
  } catch (e) {
    return 'error: ' + e.message;
  }
}

async function scenario(proxy, backends, key) {
  const out = {};
  out.hello = await result(proxy.sendCommand(['HELLO', '3']));
  const info = await result(proxy.sendCommand(['CLIENT', 'INFO']));
  out.client_info = typeof info === 'string' ? info : String(info);
  out.ping = await proxy.ping();

  const v = token();
  out.v = v;
  out.set_nx = await proxy.set(key, v, { expiration: { type: 'PX', value: 5000 }, condition: 'NX' });
  out.set_nx_again = await proxy.set(key, token(), { expiration: { type: 'PX', value: 5000 }, condition: 'NX' });
  out.set_nx_legacy_opts = await proxy.set(key, token(), { NX: true, PX: 5000 });
  out.get = await proxy.get(key);
  out.holders = await holders(backends, key, v);
  out.pttl = await proxy.pTTL(key);
  out.exists = await proxy.exists(key);

  out.renew_wrong = await proxy.set(key, v, { expiration: { type: 'PX', value: 8000 }, condition: 'IFEQ', matchValue: 'not-' + v });
  out.renew = await proxy.set(key, v, { expiration: { type: 'PX', value: 8000 }, condition: 'IFEQ', matchValue: v });
  out.pttls_after_renew = await Promise.all(backends.map((b) => b.pTTL(key)));

  out.delifeq_wrong = await result(proxy.sendCommand(['DELIFEQ', key, 'not-' + v]));
  out.holders_after_wrong = await holders(backends, key, v);
  out.delifeq = await result(proxy.sendCommand(['DELIFEQ', key, v]));
  [out.holders_after_release_now, out.holders_after_release] = await holdersSettled(backends, key, v);
  out.get_after_release = await proxy.get(key);
  out.pttl_after_release = await proxy.pTTL(key);

  // The client's own DELEX command (Redis 8.4).
  const w = token();
  out.set_w = await proxy.set(key, w, { expiration: { type: 'PX', value: 5000 }, condition: 'NX' });
  out.delex_wrong = await result(proxy.delEx(key, { condition: 'IFEQ', matchValue: v }));
  out.delex = await result(proxy.delEx(key, { condition: 'IFEQ', matchValue: w }));
  out.exists_after_delex = await proxy.exists(key);

  // Release after expiry.
  const x = token();
  out.set_short = await proxy.set(key, x, { expiration: { type: 'PX', value: 2000 }, condition: 'NX' });
  out.short_expired = await waitExpired(backends, key);
  out.get_after_expiry = await proxy.get(key);
  out.delifeq_after_expiry = await result(proxy.sendCommand(['DELIFEQ', key, x]));
  out.renew_after_expiry = await proxy.set(key, x, { expiration: { type: 'PX', value: 2000 }, condition: 'IFEQ', matchValue: x });
  out.exists_after_expiry = await proxy.exists(key);
  return out;
}

async function main() {
  const [mode, proxyAddr, backendList, key, ...rest] = process.argv.slice(2);
  const proxy = await connect(proxyAddr, {});
  // Backends are real Redis 7 masters; talk RESP2 to them to keep it plain.
  const backends = [];
  for (const a of backendList.split(',').filter(Boolean)) backends.push(await connect(a, { RESP: 2 }));
  let out;
  try {
    if (mode === 'contend') {
      out = await contend(proxy, backends, key, Number(rest[0]), Number(rest[1]), Number(rest[2]));
    } else if (mode === 'scenario') {
      out = await scenario(proxy, backends, key);
    } else {
      throw new Error('unknown mode ' + mode);
    }
  } finally {
    await proxy.close();
    for (const b of backends) await b.close();
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
  process.stderr.write((e && e.stack) || String(e));
  process.stderr.write('\n');
  process.exit(1);
});
