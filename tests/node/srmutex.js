'use strict';
// simple-redis-mutex 3.0 over node-redis 6 against redlock-proxy, driven by
// tests/interop_srmutex_test.go. The library acquires with SET NX PX,
// takes a fencing token from INCR, releases with a script that deletes the
// key and PUBLISHes on a channel (run by vote on every backend, the copies
// deduplicated by the proxy's relay), and its waiters are woken by that
// message; polling is only a fallback, set here to 30 s so that a prompt
// hand-off can only come from the message.
//
//   node srmutex.js contend  <proxy host:port> <backends> <name> <rounds> <hold-ms> <pause-ms> <start-at-epoch-ms>
//   node srmutex.js scenario <proxy host:port> <backends> <name>
//
// Prints one JSON object; CLOCK_MONOTONIC windows.

const { createClient } = require('redis');
const { lock, tryLock } = require('simple-redis-mutex');
const { sleep, now, holders, holdersSettled, waitExpired } = require('./common');

const POLL_MS = 30000; // the fallback a prompt hand-off must not come from

function connect(addr) {
  return createClient({ url: 'redis://' + addr, socket: { reconnectStrategy: false } });
}

const keyOf = (name) => '@simple-redis-mutex:lock-' + name;

// held is how many backends hold the value the proxy reads for key: the
// holder's own value, which the library keeps to itself.
async function held(proxy, backends, key) {
  const v = await proxy.get(key);
  return v === null ? 0 : holders(backends, key, v);
}

async function contend(proxy, backends, name, rounds, holdMs, pauseMs, startAt) {
  const delay = startAt - Date.now();
  if (delay > 0) await sleep(delay);
  const windows = [];
  const waits = [];
  const fences = [];
  let minHolders = null;
  for (let i = 0; i < rounds; i++) {
    const waitStart = now();
    // A 20 s lock, released after hold-ms: the proxy gives each backend
    // call 5% of the ttl (at most node_timeout, 1 s in the tests), and the
    // 250 ms of a 5 s lock is a deadline a loaded machine missed (NOQUORUM,
    // which the library throws). The hand-offs come from the release.
    const release = await lock(proxy, name, { timeout: 20000, pollingInterval: POLL_MS, failAfter: 40000 });
    const start = now();
    const h = await held(proxy, backends, keyOf(name));
    minHolders = minHolders === null ? h : Math.min(minHolders, h);
    await sleep(holdMs);
    const end = now();
    await release();
    windows.push([start, end]);
    waits.push(waitStart);
    fences.push(release.fencingToken);
    await sleep(pauseMs);
  }
  return { windows, waits, fences, min_holders: minHolders };
}

async function scenario(proxy, backends, name) {
  const out = {};
  const key = keyOf(name);
  // tryLock, a second tryLock refused, refreshTimeout (GET, PEXPIRE), release.
  const [ok, release] = await tryLock(proxy, name, { timeout: 3000 });
  out.acquired = ok;
  out.holders = await held(proxy, backends, key);
  const value = await proxy.get(key);
  const [second] = await tryLock(proxy, name, { timeout: 3000 });
  out.second = second;
  await sleep(1500);
  await release.refreshTimeout();
  out.pttls_after_refresh = await Promise.all(backends.map((b) => b.pTTL(key)));
  await release();
  [out.holders_after_release_now, out.holders_after_release] = await holdersSettled(backends, key, value);
  out.exists_after_release = await proxy.exists(key);
  const [again, releaseAgain] = await tryLock(proxy, name, { timeout: 3000 });
  out.again = again;
  out.fences = [release.fencingToken, releaseAgain.fencingToken];
  await releaseAgain();

  // Expiry: a holder that never releases; the next one takes it once the
  // key expired; the stale release leaves the new holder's key alone.
  const [, stale] = await tryLock(proxy, name, { timeout: 2000 });
  const staleValue = await proxy.get(key);
  out.short_holders = await holders(backends, key, staleValue);
  out.short_expired = await waitExpired(backends, key);
  const [next, releaseNext] = await tryLock(proxy, name, { timeout: 5000 });
  out.next = next;
  const nextValue = await proxy.get(key);
  await stale();
  out.next_holders_after_stale_release = await holders(backends, key, nextValue);
  await releaseNext();
  out.exists_at_end = await proxy.exists(key);
  return out;
}

async function main() {
  const [mode, proxyAddr, backendList, ...rest] = process.argv.slice(2);
  const proxy = connect(proxyAddr);
  proxy.on('error', (e) => process.stderr.write('proxy client: ' + e.message + '\n'));
  await proxy.connect();
  const backends = backendList.split(',').filter(Boolean).map(connect);
  await Promise.all(backends.map((b) => b.connect()));
  let result;
  try {
    if (mode === 'contend') {
      result = await contend(proxy, backends, rest[0], Number(rest[1]), Number(rest[2]), Number(rest[3]), Number(rest[4]));
    } else if (mode === 'scenario') {
      result = await scenario(proxy, backends, rest[0]);
    } else {
      throw new Error('unknown mode ' + mode);
    }
  } finally {
    await proxy.quit();
    await Promise.all(backends.map((b) => b.quit()));
  }
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((e) => {
  process.stderr.write((e && e.stack) || String(e));
  process.stderr.write('\n');
  process.exit(1);
});
