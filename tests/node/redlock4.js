'use strict';
// node-redlock 4 over ioredis 5 against redlock-proxy, driven by
// tests/interop_node_test.go.
//
//   node redlock4.js contend  <proxy host:port> <backends> <resource> <rounds> <hold-ms> <start-at-epoch-ms>
//   node redlock4.js scenario <proxy host:port> <backends> <resource>
//
// <backends> is a comma-separated list of the real Redis masters, read
// directly to see whether a lock sits on a quorum. Prints one JSON object.
// process.hrtime.bigint() is CLOCK_MONOTONIC on Linux: one clock for every
// process, so the Go side compares windows across workers.

const Redis = require('ioredis');
const Redlock = require('redlock');
const { sleep, now, holders, holdersSettled, waitExpired } = require('./common');

function connect(addr) {
  const i = addr.lastIndexOf(':');
  return new Redis({
    host: addr.slice(0, i),
    port: Number(addr.slice(i + 1)),
    maxRetriesPerRequest: 0,
    enableOfflineQueue: true,
    lazyConnect: false,
  });
}

async function outcome(p) {
  try {
    await p;
    return 'ok';
  } catch (e) {
    return e.name + ': ' + e.message;
  }
}

async function contend(proxy, backends, resource, rounds, holdMs, startAt) {
  const redlock = new Redlock([proxy], { retryCount: 2000, retryDelay: 10, retryJitter: 5 });
  redlock.on('clientError', () => {});
  const delay = startAt - Date.now();
  if (delay > 0) await sleep(delay);
  const windows = [];
  let minHolders = null;
  for (let i = 0; i < rounds; i++) {
    const lock = await redlock.lock(resource, 20000);
    const start = now();
    const h = await holders(backends, resource, lock.value);
    minHolders = minHolders === null ? h : Math.min(minHolders, h);
    await lock.extend(20000);
    await sleep(holdMs);
    const end = now();
    await lock.unlock();
    windows.push([start, end]);
    await sleep(holdMs); // let the others in before trying again
  }
  return { windows, min_holders: minHolders };
}

async function scenario(proxy, backends, resource) {
  const out = {};
  const redlock = new Redlock([proxy], { retryCount: 0, retryDelay: 10 });
  const errors = [];
  redlock.on('clientError', (e) => errors.push(String(e && e.message)));

  const lock = await redlock.lock(resource, 2000);
  out.value = lock.value;
  out.holders = await holders(backends, resource, lock.value);
  out.second_lock = await outcome(redlock.lock(resource, 2000));
  out.holders_after_second = await holders(backends, resource, lock.value);

  await lock.extend(5000);
  out.pttls_after_extend = await Promise.all(backends.map((b) => b.pttl(resource)));
  out.holders_after_extend = await holders(backends, resource, lock.value);
  out.unlock = await outcome(lock.unlock());
  [out.holders_after_unlock_now, out.holders_after_unlock] = await holdersSettled(backends, resource, lock.value);
  out.exists_after_unlock = await proxy.exists(resource);
  // A second unlock finds nothing to release: node-redlock rejects.
  out.second_unlock = await outcome(lock.unlock());

  // Multi-resource lock: all or nothing.
  const a = resource + ':a';
  const b = resource + ':b';
  const multi = await redlock.lock([a, b], 3000);
  out.multi_holders = [await holders(backends, a, multi.value), await holders(backends, b, multi.value)];
  out.multi_overlap = await outcome(redlock.lock([b, resource + ':c'], 3000));
  out.multi_c_exists = await proxy.exists(resource + ':c');
  await multi.extend(4000);
  out.multi_pttls_after_extend = await Promise.all(backends.map((x) => x.pttl(b)));
  out.multi_unlock = await outcome(multi.unlock());
  const [aNow, aLater] = await holdersSettled(backends, a, multi.value);
  const [bNow, bLater] = await holdersSettled(backends, b, multi.value);
  out.multi_holders_after_unlock_now = [aNow, bNow];
  out.multi_holders_after_unlock = [aLater, bLater];

  // Release after expiry: the script finds no key, the unlock rejects.
  const short = await redlock.lock(resource, 2000);
  out.short_holders = await holders(backends, resource, short.value);
  out.short_expired = await waitExpired(backends, resource);
  out.short_exists_after_expiry = await proxy.exists(resource);
  out.unlock_after_expiry = await outcome(short.unlock());

  // Extend after expiry: node-redlock refuses before it sends anything, so
  // drive the extend script through the server with a stale value instead.
  const again = await redlock.lock(resource, 2000);
  const stale = { resource, value: short.value, expiration: Date.now() + 10000 };
  out.stale_extend = await outcome(redlock.extend(stale, 2000));
  out.stale_unlock = await outcome(redlock.unlock(stale));
  out.again_holders = await holders(backends, resource, again.value);
  await again.unlock();

  out.client_errors = errors;
  return out;
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
