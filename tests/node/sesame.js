'use strict';
// @sesamecare-oss/redlock 1.4 (node-redlock 5's successor) over ioredis 5
// against redlock-proxy, driven by tests/interop_node_test.go. Its scripts
// begin with a protected SELECT of the client's db (ARGV[1]).
//
//   node sesame.js contend  <proxy host:port> <backends> <resource> <rounds> <hold-ms> <start-at-epoch-ms>
//   node sesame.js scenario <proxy host:port> <backends> <resource>
//   node sesame.js otherdb  <proxy host:port> <backends> <resource>
//
// Prints one JSON object. process.hrtime.bigint() is CLOCK_MONOTONIC.

const Redis = require('ioredis');
const { Redlock } = require('@sesamecare-oss/redlock');
const { sleep, now, holders, holdersSettled, waitExpired } = require('./common');

function connect(addr) {
  const i = addr.lastIndexOf(':');
  return new Redis({ host: addr.slice(0, i), port: Number(addr.slice(i + 1)), maxRetriesPerRequest: 0 });
}

// outcome is 'ok', or the error's name and message with the first reason a
// client voted against (the proxy's error, or the library's own).
async function outcome(p) {
  try {
    await p;
    return 'ok';
  } catch (e) {
    let why = '';
    if (e.attempts && e.attempts.length) {
      const stats = await e.attempts[e.attempts.length - 1];
      for (const err of stats.votesAgainst.values()) {
        why = ' [' + err.name + ': ' + err.message + ']';
        break;
      }
    }
    return e.name + ': ' + e.message + why;
  }
}

async function contend(proxy, backends, resource, rounds, holdMs, startAt) {
  const redlock = new Redlock([proxy], { retryCount: 2000, retryDelay: 10, retryJitter: 5 });
  redlock.on('error', () => {});
  const delay = startAt - Date.now();
  if (delay > 0) await sleep(delay);
  const windows = [];
  let minHolders = null;
  for (let i = 0; i < rounds; i++) {
    let lock = await redlock.acquire([resource], 20000);
    const start = now();
    const h = await holders(backends, resource, lock.value);
    minHolders = minHolders === null ? h : Math.min(minHolders, h);
    lock = await lock.extend(20000);
    await sleep(holdMs);
    const end = now();
    await lock.release();
    windows.push([start, end]);
    await sleep(holdMs); // let the others in before trying again
  }
  return { windows, min_holders: minHolders };
}

async function scenario(proxy, backends, resource) {
  const out = {};
  const redlock = new Redlock([proxy], { retryCount: 0 });
  redlock.on('error', () => {});

  let lock = await redlock.acquire([resource], 2000);
  out.holders = await holders(backends, resource, lock.value);
  out.second_acquire = await outcome(redlock.acquire([resource], 2000));
  out.holders_after_second = await holders(backends, resource, lock.value);
  lock = await lock.extend(5000);
  out.pttls_after_extend = await Promise.all(backends.map((b) => b.pttl(resource)));
  out.release = await outcome(lock.release());
  [out.holders_after_release_now, out.holders_after_release] = await holdersSettled(backends, resource, lock.value);
  out.exists_after_release = await proxy.exists(resource);
  out.second_release = await outcome(lock.release());

  // Several resources, all or none.
  const a = resource + ':a';
  const b = resource + ':b';
  let multi = await redlock.acquire([a, b], 3000);
  out.multi_holders = [await holders(backends, a, multi.value), await holders(backends, b, multi.value)];
  out.multi_overlap = await outcome(redlock.acquire([b, resource + ':c'], 3000));
  out.multi_c_exists = await proxy.exists(resource + ':c');
  multi = await multi.extend(4000);
  out.multi_pttls_after_extend = await Promise.all(backends.map((x) => x.pttl(b)));
  out.multi_release = await outcome(multi.release());
  const [aNow, aLater] = await holdersSettled(backends, a, multi.value);
  const [bNow, bLater] = await holdersSettled(backends, b, multi.value);
  out.multi_holders_after_release_now = [aNow, bNow];
  out.multi_holders_after_release = [aLater, bLater];

  // using(): the routine runs under the lock, extended automatically while
  // it runs past the ttl (2 s; the routine takes 3 s).
  let usingMin = null;
  out.using = await redlock.using([resource], 2000, { automaticExtensionThreshold: 1000 }, async (signal) => {
    const t0 = Date.now();
    while (Date.now() - t0 < 3000) {
      // The lock's value is not exposed here: count the backends holding
      // the key at all, and that the value a quorum holds is one value.
      const vals = await Promise.all(backends.map((x) => x.get(resource)));
      const counts = {};
      for (const v of vals) if (v !== null) counts[v] = (counts[v] || 0) + 1;
      const h = Math.max(0, ...Object.values(counts));
      usingMin = usingMin === null ? h : Math.min(usingMin, h);
      if (signal.aborted) return 'aborted: ' + String(signal.error && signal.error.message);
      await sleep(100);
    }
    return 'held';
  });
  out.using_min_holders = usingMin;
  out.exists_after_using = await proxy.exists(resource);

  // Release after expiry: the script finds nothing to delete; the library
  // counts that as a vote against.
  const short = await redlock.acquire([resource], 2000);
  out.short_holders = await holders(backends, resource, short.value);
  out.short_expired = await waitExpired(backends, resource);
  out.release_after_expiry = await outcome(short.release());
  // Taken again by someone else: the stale lock's extend and release must
  // leave the new holder alone.
  const again = await redlock.acquire([resource], 2000);
  const stale = await outcome(redlock.extend({ resources: [resource], value: short.value, expiration: Date.now() + 10000 }, 2000));
  out.stale_extend = stale;
  out.stale_release = await outcome(redlock.release({ resources: [resource], value: short.value, expiration: 0 }));
  out.again_holders = await holders(backends, resource, again.value);
  await again.release();

  // A client configured with another db: its SELECT is refused.
  const db1 = new Redlock([proxy], { retryCount: 0, db: 1 });
  db1.on('error', () => {});
  out.db1_acquire = await outcome(db1.acquire([resource + ':db1'], 2000));
  out.db1_exists = await proxy.exists(resource + ':db1');
  return out;
}

// otherdb: through a proxy one of whose backends uses database 1, every
// script of the library is refused.
async function otherdb(proxy, backends, resource) {
  const redlock = new Redlock([proxy], { retryCount: 0 });
  redlock.on('error', () => {});
  return { acquire: await outcome(redlock.acquire([resource], 2000)) };
}

async function main() {
  const [mode, proxyAddr, backendList, resource, ...rest] = process.argv.slice(2);
  const proxy = connect(proxyAddr);
  const backends = backendList.split(',').filter(Boolean).map(connect);
  let result;
  try {
    if (mode === 'contend') {
      result = await contend(proxy, backends, resource, Number(rest[0]), Number(rest[1]), Number(rest[2]));
    } else if (mode === 'scenario') {
      result = await scenario(proxy, backends, resource);
    } else if (mode === 'otherdb') {
      result = await otherdb(proxy, backends, resource);
    } else {
      throw new Error('unknown mode ' + mode);
    }
  } finally {
    proxy.disconnect();
    backends.forEach((b) => b.disconnect());
  }
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((e) => {
  process.stderr.write((e && e.stack) || String(e));
  process.stderr.write('\n');
  process.exit(1);
});
