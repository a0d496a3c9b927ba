'use strict';
// Helpers shared by the interop scripts (noderedis.js, redlock4.js, srmutex.js, …).
// A backend client is anything with an async get(key): node-redis or ioredis.

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// now is CLOCK_MONOTONIC (process.hrtime on Linux): one clock for every
// process, so the Go side compares windows across workers.
const now = () => process.hrtime.bigint().toString();

// holders counts the backends where key holds value.
async function holders(backends, key, value) {
  let n = 0;
  for (const b of backends) {
    if ((await b.get(key)) === value) n++;
  }
  return n;
}

// [holders now, holders once the proxy's background deletes landed]: a
// release answers when a quorum deleted; the rest follow within ~2s.
async function holdersSettled(backends, key, value) {
  const first = await holders(backends, key, value);
  let n = first;
  const deadline = Date.now() + 2000;
  while (n !== 0 && Date.now() < deadline) {
    await sleep(20);
    n = await holders(backends, key, value);
  }
  return [first, n];
}

// waitExpired waits, for at most limitMs, until key is on no backend (its
// ttl ran out), and returns whether it is. A test of what follows an expiry
// waits for it rather than sleeping for a short ttl: each backend call gets
// 5% of the ttl, too little under load for a short one.
async function waitExpired(backends, key, limitMs = 10000) {
  const deadline = Date.now() + limitMs;
  for (;;) {
    let n = 0;
    for (const b of backends) n += await b.exists(key);
    if (n === 0) return true;
    if (Date.now() > deadline) return false;
    await sleep(20);
  }
}

module.exports = { sleep, now, holders, holdersSettled, waitExpired };
