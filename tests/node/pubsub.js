'use strict';
// ioredis 5 in subscriber mode through redlock-proxy, driven by
// tests/pubsub_clients_test.go:
//   node pubsub.js <subscriber proxy host:port> <other proxy host:port> <backends>
// It subscribes (a channel and a pattern) through the first proxy, PINGs in
// subscriber mode, publishes through the same proxy, through the other one
// and on every backend directly (the last two twice in a row), counts the
// deliveries of each message, then leaves subscriber mode and runs a
// command. One JSON object on stdout.

const Redis = require('ioredis');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function connect(addr) {
  const i = addr.lastIndexOf(':');
  return new Redis({ host: addr.slice(0, i), port: Number(addr.slice(i + 1)), maxRetriesPerRequest: 0, enableOfflineQueue: true });
}

async function main() {
  const [subAddr, pubAddr, backendList] = process.argv.slice(2);
  const out = {};
  const sub = connect(subAddr);
  const counts = {};
  let total = 0;
  sub.on('message', (ch, msg) => { counts[msg] = (counts[msg] || 0) + 1; total++; });
  sub.on('pmessage', (pat, ch, msg) => { counts['p:' + msg] = (counts['p:' + msg] || 0) + 1; total++; });
  out.subscribe = await sub.subscribe('nodech');
  out.psubscribe = await sub.psubscribe('nodech*');
  out.ping = await sub.ping();

  const same = connect(subAddr);
  const other = connect(pubAddr);
  const direct = backendList.split(',').map(connect);
  out.publish_receivers = await same.publish('nodech', 'same-proxy');
  await other.publish('nodech', 'other-proxy');
  for (const b of direct) await b.publish('nodech', 'script');
  for (let i = 0; i < 2; i++) await other.publish('nodech', 'twice');
  for (let i = 0; i < 2; i++) for (const b of direct) await b.publish('nodech', 'twice-everywhere');
  const expected = 2 * (1 + 1 + 1 + 2 + 2);
  const deadline = Date.now() + 15000;
  while (total < expected && Date.now() < deadline) await sleep(20);
  await sleep(500); // a duplicate would arrive by now
  out.counts = counts;

  // Named: ioredis resolves an UNSUBSCRIBE without names only at a count
  // of 0, with Redis as with the proxy.
  out.unsubscribe = await sub.unsubscribe('nodech');
  out.punsubscribe = await sub.punsubscribe('nodech*');
  out.get_after = await sub.get('nodech-none');
  for (const c of [sub, same, other, ...direct]) c.disconnect();
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.log(JSON.stringify({ error: String(e && e.stack || e) }));
  process.exit(1);
});
