#!/usr/bin/python3
"""Lock workers for a move from one Redis to redlock-proxy, driven by
tests/migrate_test.go.

Usage:
  migrate_worker.py legacy <old redis host:port> <keys,> <run-ms> <ttl-ms>
  migrate_worker.py proxy  <proxy host:port>     <keys,> <run-ms> <ttl-ms>

legacy locks as an application that has not moved: SET key token NX PX ttl
on the old single Redis, released with a compare-and-delete script. proxy
locks with redis-py's Lock through the proxy. Both pick a key at random,
try once, hold a random time within the lock's validity, release, and go
on for run-ms. One JSON object on stdout: the critical sections as
[key, start, end] in CLOCK_MONOTONIC nanoseconds (one clock for every
process on Linux) and the count of each outcome.
"""

import json
import random
import sys
import time
import uuid

import redis
from redis.exceptions import LockError, RedisError

RELEASE = """
if redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("del", KEYS[1])
else
    return 0
end"""


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def connect(addr):
    host, port = addr.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=5)


class Legacy:
    def __init__(self, r, ttl_ms):
        self.r, self.ttl_ms = r, ttl_ms
        self.release_script = r.register_script(RELEASE)

    def acquire(self, key):
        token = uuid.uuid4().hex
        if self.r.set(key, token, nx=True, px=self.ttl_ms):
            return token
        return None

    def release(self, key, token):
        return self.release_script(keys=[key], args=[token]) == 1


class Proxy:
    def __init__(self, r, ttl_ms):
        self.r, self.ttl = r, ttl_ms / 1000.0

    def acquire(self, key):
        lock = self.r.lock(key, timeout=self.ttl)
        if lock.acquire(blocking=False):
            return lock
        return None

    def release(self, key, lock):
        try:
            lock.release()
            return True
        except LockError:
            return False


def run(locker, keys, run_ms, ttl_ms):
    # The validity a client of one Redis assumes, less the proxy's drift.
    valid_ns = (ttl_ms - ttl_ms // 100 - 2) * 1000000
    end_at = now_ns() + run_ms * 1000000
    windows, outcomes = [], {}

    def count(k):
        outcomes[k] = outcomes.get(k, 0) + 1

    while now_ns() < end_at:
        key = random.choice(keys)
        sent = now_ns()
        try:
            held = locker.acquire(key)
        except RedisError as e:
            count(str(e).split(" ")[0] or "error")
            time.sleep(0.005)
            continue
        if held is None:
            count("held")
            time.sleep(0.002 + random.random() * 0.008)
            continue
        start = now_ns()
        count("granted")
        deadline = sent + valid_ns
        hold = random.random() * min(0.2, max(0, deadline - start) / 1e9)
        time.sleep(hold)
        end = min(now_ns(), deadline)
        windows.append([key, start, end])
        try:
            count("unlock:%d" % locker.release(key, held))
        except RedisError as e:
            count("unlock:" + (str(e).split(" ")[0] or "error"))
    return {"windows": windows, "outcomes": outcomes}


def main(argv):
    mode, addr, keys, run_ms, ttl_ms = argv[1], argv[2], argv[3].split(","), int(argv[4]), int(argv[5])
    r = connect(addr)
    if mode == "legacy":
        locker = Legacy(r, ttl_ms)
    elif mode == "proxy":
        locker = Proxy(r, ttl_ms)
    else:
        raise SystemExit("unknown mode " + mode)
    json.dump(run(locker, keys, run_ms, ttl_ms), sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv)
