'use strict';
// redis-semaphore 5.8 over ioredis 5 against redlock-proxy, driven by
// tests/interop_node_test.go: Mutex (SET NX PX, refresh and release
// scripts), Semaphore and MultiSemaphore (sorted sets of holders scored by
// the client's clock, scripts run by vote; Semaphore releases with a bare
// ZREM).
//
//   node semaphore.js contend  <proxy host:port> <backends> <kind> <key> <rounds> <hold-ms> <start-at-epoch-ms>
//   node semaphore.js scenario <proxy host:port> <backends> <key>
//
// kind is mutex, semaphore (limit 1) or multi (limit 3, 2 permits each: one
// holder at a time). Prints one JSON object; CLOCK_MONOTONIC windows.

const Redis = require('ioredis');
const { Mutex, Semaphore, MultiSemaphore } = require('redis-semaphore');
const { sleep, now, holders, holdersSettled, waitExpired } = require('./common');

function connect(addr) {
  const i = addr.lastIndexOf(':');
  return new Redis({ host: addr.slice(0, i), port: Number(addr.slice(i + 1)), maxRetriesPerRequest: 0 });
}

// members counts the backends whose sorted set at key has member.
async function members(backends, key, member) {
  let n = 0;
  for (const b of backends) {
    if ((await b.zscore(key, member)) !== null) n++;
  }
  return n;
}

// [count() now, count() once the proxy's calls to the slower backends
// landed]: an answer comes at the quorum; the rest follow within ~2 s.
async function settled(count) {
  const first = await count();
  let n = first;
  const deadline = Date.now() + 2000;
  while (n !== 0 && Date.now() < deadline) {
    await sleep(20);
    n = await count();
  }
  return [first, n];
}

// The key and member that show a holder on the backends.
function held(kind, key, lock) {
  switch (kind) {
    case 'mutex':
      return (backends) => holders(backends, 'mutex:' + key, lock.identifier);
    case 'semaphore':
      return (backends) => members(backends, 'semaphore:' + key, lock.identifier);
    default:
      return (backends) => members(backends, 'semaphore:' + key, lock.identifier + '_0');
  }
}

function make(kind, proxy, key, opts) {
  switch (kind) {
    case 'mutex':
      return new Mutex(proxy, key, opts);
    case 'semaphore':
      return new Semaphore(proxy, key, 1, opts);
    case 'multi':
      return new MultiSemaphore(proxy, key, 3, 2, opts);
  }
  throw new Error('unknown kind ' + kind);
}

async function contend(proxy, backends, kind, key, rounds, holdMs, startAt) {
  const delay = startAt - Date.now();
  if (delay > 0) await sleep(delay);
  const windows = [];
  let minHolders = null;
  let lost = null;
  for (let i = 0; i < rounds; i++) {
    const lock = make(kind, proxy, key, {
      lockTimeout: 20000,
      acquireTimeout: 20000,
      retryInterval: 10,
      refreshInterval: 500,
      onLockLost: (e) => { lost = String(e && e.message); },
    });
    await lock.acquire();
    const start = now();
    const h = await held(kind, key, lock)(backends);
    minHolders = minHolders === null ? h : Math.min(minHolders, h);
    await sleep(holdMs);
    const end = now();
    await lock.release();
    windows.push([start, end]);
    if (lost) return { error: 'lock lost while held: ' + lost };
    await sleep(holdMs); // let the others in before trying again
  }
  return { windows, min_holders: minHolders };
}

// scenario runs the mutex, semaphore and multi-semaphore parts side by
// side (each waits seconds for refreshes or expiries), on their own keys.
async function scenario(proxy, backends, key) {
  const out = {};
  const lostErrors = [];
  const onLockLost = (e) => lostErrors.push(String(e && e.message));
  await Promise.all([
    mutexPart(proxy, backends, key, out, onLockLost),
    semaphorePart(proxy, backends, key, out),
    multiPart(proxy, backends, key, out, onLockLost),
  ]);
  out.lost = lostErrors;
  return out;
}

async function mutexPart(proxy, backends, key, out, onLockLost) {
  // Mutex: held across several refreshes, beyond its lockTimeout.
  const m = new Mutex(proxy, key, { lockTimeout: 2000, refreshInterval: 500, acquireTimeout: 500, onLockLost });
  await m.acquire();
  const mkey = 'mutex:' + key;
  out.mutex_holders = await holders(backends, mkey, m.identifier);
  out.mutex_other = await new Mutex(proxy, key, { lockTimeout: 2000, acquireTimeout: 300 }).tryAcquire();
  await sleep(3000);
  out.mutex_holders_after_3s = await holders(backends, mkey, m.identifier);
  out.mutex_pttls = await Promise.all(backends.map((b) => b.pttl(mkey)));
  await m.release();
  [out.mutex_holders_after_release_now, out.mutex_holders_after_release] = await holdersSettled(backends, mkey, m.identifier);
  out.mutex_exists_after_release = await proxy.exists(mkey);

  // Mutex: release after expiry (no refresh), once another owner holds it.
  const short = new Mutex(proxy, key, { lockTimeout: 2000, refreshInterval: 0, acquireTimeout: 500 });
  await short.acquire();
  out.short_holders = await holders(backends, mkey, short.identifier);
  out.short_expired = await waitExpired(backends, mkey);
  const next = new Mutex(proxy, key, { lockTimeout: 5000, refreshInterval: 0, acquireTimeout: 500 });
  out.next_acquire = await next.tryAcquire();
  // The stale owner refreshes (acquiredExternally: the refresh script) and
  // releases: neither touches the new owner's lock.
  out.stale_refresh = await new Mutex(proxy, key, { identifier: short.identifier, acquiredExternally: true, lockTimeout: 2000, refreshInterval: 0 }).tryAcquire();
  await short.release();
  out.next_holders_after_stale_release = await holders(backends, mkey, next.identifier);
  await next.release();
}

async function semaphorePart(proxy, backends, key, out) {
  // Semaphore, limit 2: a third is refused until one releases (bare ZREM).
  const skey = 'semaphore:' + key;
  const s1 = new Semaphore(proxy, key, 2, { lockTimeout: 3000, refreshInterval: 0, acquireTimeout: 500 });
  const s2 = new Semaphore(proxy, key, 2, { lockTimeout: 3000, refreshInterval: 0, acquireTimeout: 500 });
  const s3 = new Semaphore(proxy, key, 2, { lockTimeout: 3000, refreshInterval: 0, acquireTimeout: 300 });
  await s1.acquire();
  await s2.acquire();
  out.sem_holders = [await members(backends, skey, s1.identifier), await members(backends, skey, s2.identifier)];
  out.sem_third = await s3.tryAcquire();
  out.sem_zcard = await proxy.zcard(skey);
  await s1.release();
  [out.sem_s1_after_release_now, out.sem_s1_after_release] = await settled(() => members(backends, skey, s1.identifier));
  out.sem_third_after_release = await s3.tryAcquire();
  out.sem_zcard_after = await proxy.zcard(skey);
  await s2.release();
  await s3.release();
  out.sem_zcard_empty = await proxy.zcard(skey);

  // Semaphore: release after the holder set expired; a stale refresh.
  const se = new Semaphore(proxy, key, 1, { lockTimeout: 2000, refreshInterval: 0, acquireTimeout: 500 });
  await se.acquire();
  out.sem_short_holders = await members(backends, skey, se.identifier);
  out.sem_short_expired = await waitExpired(backends, skey);
  out.sem_stale_refresh = await new Semaphore(proxy, key, 1, { identifier: se.identifier, acquiredExternally: true, lockTimeout: 2000, refreshInterval: 0 }).tryAcquire();
  await se.release();
  out.sem_exists_after = await proxy.exists(skey);
}

async function multiPart(proxy, backends, key, out, onLockLost) {
  // MultiSemaphore, limit 3, 2 permits each: one holder at a time, held
  // beyond its lockTimeout by refreshes.
  const mkey2 = key + ':multi';
  const msk = 'semaphore:' + mkey2;
  const ms1 = new MultiSemaphore(proxy, mkey2, 3, 2, { lockTimeout: 2000, refreshInterval: 500, acquireTimeout: 500, onLockLost });
  const ms2 = new MultiSemaphore(proxy, mkey2, 3, 2, { lockTimeout: 2000, refreshInterval: 0, acquireTimeout: 300 });
  await ms1.acquire();
  out.multi_holders = [await members(backends, msk, ms1.identifier + '_0'), await members(backends, msk, ms1.identifier + '_1')];
  out.multi_second = await ms2.tryAcquire();
  await sleep(3000);
  out.multi_holders_after_3s = await members(backends, msk, ms1.identifier + '_0');
  await ms1.release();
  [out.multi_holders_after_release_now, out.multi_holders_after_release] = await settled(() => members(backends, msk, ms1.identifier + '_0'));
  out.multi_second_after_release = await ms2.tryAcquire();
  await ms2.release();
  out.multi_zcard_empty = await proxy.zcard(msk);
}

async function main() {
  const [mode, proxyAddr, backendList, ...rest] = process.argv.slice(2);
  const proxy = connect(proxyAddr);
  const backends = backendList.split(',').filter(Boolean).map(connect);
  let result;
  try {
    if (mode === 'contend') {
      result = await contend(proxy, backends, rest[0], rest[1], Number(rest[2]), Number(rest[3]), Number(rest[4]));
    } else if (mode === 'scenario') {
      result = await scenario(proxy, backends, rest[0]);
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
