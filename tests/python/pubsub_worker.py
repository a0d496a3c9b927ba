#!/usr/bin/python3
"""redis-py pub/sub through redlock-proxy, driven by tests/pubsub_clients_test.go.

Usage:
  pubsub_worker.py <subscriber proxy host:port> <other proxy host:port> <backends>

It subscribes (a channel and a pattern) through the first proxy, publishes
through the same proxy, through the other one, and on every backend
directly (as a script run on every backend does), the last two twice in a
row, and prints one JSON object: how many times each message arrived.
"""

import json
import sys
import time

import redis


def connect(addr):
    host, port = addr.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=10)


def main():
    sub_addr, pub_addr, backends = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    out = {}
    sub = connect(sub_addr)
    p = sub.pubsub()
    p.subscribe("pych")
    p.psubscribe("pych*")
    confirms = []
    deadline = time.time() + 10
    while len(confirms) < 2 and time.time() < deadline:
        m = p.get_message(timeout=0.5)
        if m is not None:
            confirms.append([m["type"], m["channel"].decode(), m["data"]])
    out["confirms"] = confirms
    p.ping()
    pong = None
    deadline = time.time() + 10
    while pong is None and time.time() < deadline:
        m = p.get_message(timeout=0.5)
        if m is not None:
            pong = m["type"]
    out["pong"] = pong

    same, other = connect(sub_addr), connect(pub_addr)
    direct = [connect(b) for b in backends]
    out["publish_receivers"] = same.publish("pych", "same-proxy")
    other.publish("pych", "other-proxy")
    for b in direct:
        b.publish("pych", "script")
    for _ in range(2):
        other.publish("pych", "twice")
    for _ in range(2):
        for b in direct:
            b.publish("pych", "twice-everywhere")
    expected = 2 * (1 + 1 + 1 + 2 + 2)

    counts = {}
    total = 0
    deadline = time.time() + 15
    quiet_until = None
    while time.time() < deadline:
        m = p.get_message(timeout=0.1)
        if m is None:
            if quiet_until is not None and time.time() >= quiet_until:
                break
            continue
        if m["type"] not in ("message", "pmessage"):
            continue
        key = ("p:" if m["type"] == "pmessage" else "") + m["data"].decode()
        counts[key] = counts.get(key, 0) + 1
        total += 1
        if total >= expected and quiet_until is None:
            quiet_until = time.time() + 0.5
    out["counts"] = counts
    p.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
