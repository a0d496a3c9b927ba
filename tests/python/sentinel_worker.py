#!/usr/bin/python3
"""redis-py Sentinel against a tier of redlock-proxies, driven by tests/tier_test.go.

Usage:
  sentinel_worker.py <proxies> <service> <lock name> <other proxy host:port>

<proxies> is a comma-separated list of host:port, given to Sentinel as its
sentinels. The worker discovers the master (SENTINEL MASTERS, which redis-py
4.3 parses into a dict and checks for flags and num-other-sentinels), takes
a redis-py Lock through master_for, checks through another proxy that the
lock is held there too, and releases it. It prints one JSON object.
"""

import json
import sys

import redis
from redis.sentinel import Sentinel


def main():
    proxies = []
    for a in sys.argv[1].split(","):
        host, port = a.rsplit(":", 1)
        proxies.append((host, int(port)))
    service, name, other = sys.argv[2], sys.argv[3], sys.argv[4]

    out = {}
    s = Sentinel(proxies, socket_timeout=5)
    host, port = s.discover_master(service)
    out["master"] = "%s:%d" % (host, port)
    r = s.master_for(service, socket_timeout=10)
    lock = r.lock(name, timeout=10)
    out["acquired"] = lock.acquire(blocking=False)
    out["owned"] = lock.owned()
    ohost, oport = other.rsplit(":", 1)
    o = redis.Redis(host=ohost, port=int(oport), socket_timeout=10)
    out["seen_elsewhere"] = o.get(name) == lock.local.token
    out["other_acquire"] = o.set(name, "intruder", nx=True, px=10000) is not None
    lock.release()
    out["released"] = not lock.locked()
    try:
        s.discover_master("no-such-service")
        out["unknown_service"] = "found"
    except redis.sentinel.MasterNotFoundError:
        out["unknown_service"] = "MasterNotFoundError"
    print(json.dumps(out))


if __name__ == "__main__":
    main()
