// The shape of ioredis-mutex's speed test, written here from its
// description (issue 36), not from its code: N contenders for one key in
// one process, all on one ioredis connection, plus one subscriber
// connection. A contender takes the lock with SET key id NX (no expiry);
// the holder gives it back with DEL key and PUBLISH on the key's channel.
// A release message wakes the contender that has waited longest ("next",
// the default) or every waiting one ("all"); each waiting contender also
// retries on its own every second, should a message be missed. It prints
// one JSON line: the time for all N to have held and released the lock
// once, the SET NX attempts, and whether two ever held it at once.
//
//   node mutexspeed.js host port [contenders=5000] [limit-ms=10000] [next|all]
"use strict";
const Redis = require("ioredis");

async function main() {
  const [host, port] = [process.argv[2] || "127.0.0.1", Number(process.argv[3] || 6379)];
  const n = Number(process.argv[4] || 5000);
  const limit = Number(process.argv[5] || 10000);
  const wakeAll = process.argv[6] === "all";
  const key = "mutexspeed:" + process.pid + ":" + Date.now();
  const channel = key + ":released";
  const cmd = new Redis({ host, port, maxRetriesPerRequest: 1 });
  const sub = new Redis({ host, port, maxRetriesPerRequest: 1 });
  let waiting = [];
  sub.on("message", () => {
    if (!wakeAll) {
      const wake = waiting.shift();
      if (wake) wake();
      return;
    }
    const w = waiting;
    waiting = [];
    for (const wake of w) wake();
  });
  await sub.subscribe(channel);

  let holders = 0, overlap = false, done = 0, attempts = 0;
  const start = Date.now();
  async function contender(id) {
    for (;;) {
      // Listen before trying, so that a release between the refusal
      // and the wait is not missed.
      let wake;
      const woken = new Promise((resolve) => { wake = resolve; });
      waiting.push(wake);
      attempts++;
      const ok = await cmd.set(key, id, "NX");
      if (ok === "OK") {
        const i = waiting.indexOf(wake);
        if (i >= 0) waiting.splice(i, 1);
        break;
      }
      const timer = setTimeout(wake, 1000); // a missed message
      await woken;
      clearTimeout(timer);
      const i = waiting.indexOf(wake);
      if (i >= 0) waiting.splice(i, 1);
    }
    if (++holders > 1) overlap = true;
    await new Promise((r) => setImmediate(r));
    holders--;
    await cmd.del(key);
    await cmd.publish(channel, id);
    done++;
  }
  const all = Promise.all(Array.from({ length: n }, (_, i) => contender("c" + i)));
  const over = new Promise((r) => setTimeout(() => r("timeout"), limit));
  const res = await Promise.race([all.then(() => "done"), over]);
  const ms = Date.now() - start;
  console.log(JSON.stringify({ result: res, contenders: n, done, ms, attempts, overlap }));
  cmd.disconnect();
  sub.disconnect();
  process.exit(res === "done" && !overlap ? 0 : 1);
}

main().catch((e) => { console.error(e); process.exit(2); });
