#!/usr/bin/python3
"""redis-py Lock against redlock-proxy, driven by tests/interop_python_test.go.

Usage:
  lock_worker.py contend  <proxy host:port> <backends> <name> <rounds> <hold-ms> <start-at-epoch-ms>
  lock_worker.py scenario <proxy host:port> <backends> <name>
  lock_worker.py contend-noexpiry <same as contend>
  lock_worker.py noexpiry <proxy host:port> <backends> <name>
  lock_worker.py pipeline <proxy host:port> <backends> <name>

The noexpiry modes use Lock(timeout=None): SET NX with no expiry, which the
proxy keeps (its default_ttl must be 2 s: the lock is held 5 s).

<backends> is a comma-separated list of host:port of the real Redis masters;
the worker reads them directly to see whether its token sits on a quorum.
Every mode prints one JSON object on stdout; the Go test decides pass/fail.
Times are CLOCK_MONOTONIC nanoseconds, which on Linux is one clock for every
process, so the Go side can compare windows across workers.
"""

import json
import sys
import threading
import time

import redis
from redis.exceptions import LockError, LockNotOwnedError


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def connect(addr):
    host, port = addr.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=10)


def holders(backends, name, token):
    """How many backends hold token under name."""
    n = 0
    for b in backends:
        if b.get(name) == token:
            n += 1
    return n


def holders_settled(backends, name, token):
    """(holders now, holders once the proxy's background deletes landed):
    a release answers when a quorum deleted; the rest follow within ~2s."""
    first = n = holders(backends, name, token)
    deadline = time.monotonic() + 2
    while n and time.monotonic() < deadline:
        time.sleep(0.02)
        n = holders(backends, name, token)
    return first, n


def backend_pttls(backends, name):
    return [b.pttl(name) for b in backends]


def wait_expired(backends, name, limit=10):
    """Wait, for at most limit seconds, until name is on no backend (its ttl
    ran out); whether it is. A test of what follows an expiry waits for it
    rather than sleeping for a short ttl: each backend call gets 5% of the
    ttl, too little under load for a short one."""
    deadline = time.monotonic() + limit
    while any(b.exists(name) for b in backends):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


# A 20 s lock, released after hold_ms: the proxy gives each backend call 5%
# of the ttl (at most node_timeout, 1 s in the tests), and the 100 ms of a
# 2 s lock is a deadline a loaded machine missed (NOQUORUM, which redis-py
# raises: TestInteropRedisPyLock/contention at load 13).
def contend(proxy, backends, name, rounds, hold_ms, start_at_ms, timeout=20):
    delay = start_at_ms / 1000.0 - time.time()
    if delay > 0:
        time.sleep(delay)
    windows = []
    min_holders = None
    for _ in range(rounds):
        lock = proxy.lock(name, timeout=timeout, sleep=0.01, blocking_timeout=20)
        if not lock.acquire():
            return {"error": "blocking acquire timed out after 20s"}
        start = now_ns()
        token = lock.local.token
        h = holders(backends, name, token)
        min_holders = h if min_holders is None else min(min_holders, h)
        if not lock.owned():
            return {"error": "owned() is False right after acquire"}
        if timeout is not None and not lock.extend(1):
            return {"error": "extend(1) returned False while held"}
        time.sleep(hold_ms / 1000.0)
        end = now_ns()
        lock.release()
        windows.append([start, end])
        time.sleep(hold_ms / 1000.0)  # let the others in before trying again
    return {"windows": windows, "min_holders": min_holders}


def scenario(proxy, backends, name):
    out = {}
    lock = proxy.lock(name, timeout=2, blocking_timeout=5)
    out["acquire"] = lock.acquire()
    token = lock.local.token
    out["token"] = token.decode()
    out["owned"] = lock.owned()
    out["locked"] = lock.locked()
    out["holders"] = holders(backends, name, token)
    out["get"] = (proxy.get(name) or b"").decode()

    other = proxy.lock(name, timeout=2)
    out["other_nonblocking"] = other.acquire(blocking=False)
    out["other_owned"] = other.owned()
    t0 = time.monotonic()
    out["other_blocking_short"] = other.acquire(blocking_timeout=0.3)
    out["other_blocking_short_waited_ms"] = int((time.monotonic() - t0) * 1000)

    # extend adds to the remaining ttl (replace_ttl=False): about 2s + 3s.
    out["extend"] = lock.extend(3)
    out["pttls_after_extend"] = backend_pttls(backends, name)
    out["proxy_pttl_after_extend"] = proxy.pttl(name)
    # extend with replace_ttl sets it to exactly the given time (lowers it).
    out["extend_replace"] = lock.extend(3, replace_ttl=True)
    out["pttls_after_extend_replace"] = backend_pttls(backends, name)
    # reacquire resets the ttl to timeout (2s).
    out["reacquire"] = lock.reacquire()
    out["pttls_after_reacquire"] = backend_pttls(backends, name)

    lock.release()
    out["owned_after_release"] = lock.owned()
    out["locked_after_release"] = lock.locked()
    out["holders_after_release_now"], out["holders_after_release"] = holders_settled(backends, name, token)
    try:
        lock.release()
        out["second_release"] = "no error"
    except LockError as e:
        out["second_release"] = type(e).__name__

    # Another process can take it now; our stale token must not release it.
    thief = proxy.lock(name, timeout=2)
    out["thief_acquire"] = thief.acquire(blocking=False)
    try:
        lock.do_release(token)
        out["stale_release"] = "no error"
    except LockNotOwnedError as e:
        out["stale_release"] = type(e).__name__
    out["thief_holders"] = holders(backends, name, thief.local.token)
    thief.release()

    # Blocking acquire waits for a holder that never releases (its ttl ends).
    holder = proxy.lock(name, timeout=2)
    out["holder_acquire"] = holder.acquire(blocking=False)
    waiter = proxy.lock(name, timeout=2, blocking_timeout=8, sleep=0.05)
    t0 = time.monotonic()
    out["waiter_acquire"] = waiter.acquire()
    out["waiter_waited_ms"] = int((time.monotonic() - t0) * 1000)
    out["waiter_holders"] = holders(backends, name, waiter.local.token)
    waiter.release()

    # Release and extend after expiry raise LockNotOwnedError.
    short = proxy.lock(name, timeout=2)
    out["short_acquire"] = short.acquire(blocking=False)
    out["short_expired"] = wait_expired(backends, name)
    out["short_owned_after_expiry"] = short.owned()
    try:
        short.extend(2)
        out["extend_after_expiry"] = "no error"
    except LockNotOwnedError as e:
        out["extend_after_expiry"] = type(e).__name__
    try:
        short.reacquire()
        out["reacquire_after_expiry"] = "no error"
    except LockNotOwnedError as e:
        out["reacquire_after_expiry"] = type(e).__name__
    try:
        short.release()
        out["release_after_expiry"] = "no error"
    except LockNotOwnedError as e:
        out["release_after_expiry"] = type(e).__name__

    # The context manager form most apps use.
    with proxy.lock(name, timeout=2, blocking_timeout=5) as cm:
        out["with_holders"] = holders(backends, name, cm.local.token)
    out["with_exists_after"] = proxy.exists(name)
    return out


def noexpiry(proxy, backends, name):
    """Lock(timeout=None): held beyond the proxy's default_ttl, TTL -1,
    released by its script."""
    out = {}
    lock = proxy.lock(name)
    out["acquire"] = lock.acquire(blocking=False)
    token = lock.local.token
    out["holders"] = holders(backends, name, token)
    out["ttl"] = proxy.ttl(name)
    out["pttl"] = proxy.pttl(name)
    out["other_nonblocking"] = proxy.lock(name).acquire(blocking=False)
    time.sleep(5)  # more than twice the proxy's default_ttl (2 s)
    out["holders_after_5s"] = holders(backends, name, token)
    out["ttl_after_5s"] = proxy.ttl(name)
    out["owned_after_5s"] = lock.owned()
    out["locked_after_5s"] = lock.locked()
    out["other_after_5s"] = proxy.lock(name).acquire(blocking=False)
    # On the backends the key carries the proxy's lease, renewed.
    out["backend_pttls"] = backend_pttls(backends, name)
    for what, f in (("extend", lambda: lock.extend(1)), ("reacquire", lock.reacquire)):
        try:
            f()
            out[what] = "no error"
        except LockError as e:
            out[what] = type(e).__name__
    lock.release()
    out["owned_after_release"] = lock.owned()
    out["holders_after_release_now"], out["holders_after_release"] = holders_settled(backends, name, token)
    out["exists_after_release"] = proxy.exists(name)

    # A blocking waiter behind a holder without expiry gets the lock when
    # the holder releases it (from another thread: thread_local=False).
    holder = proxy.lock(name, thread_local=False)
    out["holder_acquire"] = holder.acquire(blocking=False)
    timer = threading.Timer(1.0, holder.release)
    timer.start()
    waiter = proxy.lock(name, blocking_timeout=8, sleep=0.05)
    t0 = time.monotonic()
    out["waiter_acquire"] = waiter.acquire()
    out["waiter_waited_ms"] = int((time.monotonic() - t0) * 1000)
    timer.join()
    out["waiter_holders"] = holders(backends, name, waiter.local.token)
    out["waiter_ttl"] = proxy.ttl(name)
    waiter.release()

    with proxy.lock(name, blocking_timeout=5) as cm:
        out["with_holders"] = holders(backends, name, cm.local.token)
    out["with_exists_after"] = proxy.exists(name)
    return out


def pipeline(proxy, backends, name):
    """The legacy lock as a redis-py transaction (pipeline(), which is
    MULTI ... EXEC by default), and check-and-set with transaction()."""
    p = proxy.pipeline()
    p.setnx(name, "tok")
    p.expire(name, 10)
    p.get(name)
    first = p.execute()
    p = proxy.pipeline()
    p.setnx(name, "other")
    p.get(name)
    second = p.execute()
    counter = name + ":n"

    def incr(pipe):
        n = int(pipe.get(counter) or 0)
        pipe.multi()
        pipe.set(counter, n + 1)

    for _ in range(3):
        proxy.transaction(incr, counter)
    return {
        "first": [first[0], first[1], first[2].decode()],
        "second": [second[0], second[1].decode()],
        "ttl": proxy.ttl(name),
        "counter": int(proxy.get(counter)),
        "token_on": sum(1 for b in backends if b.get(name) == b"tok"),
    }


def main(argv):
    mode, proxy_addr, backend_list, name = argv[1:5]
    proxy = connect(proxy_addr)
    backends = [connect(a) for a in backend_list.split(",") if a]
    if mode == "contend":
        rounds, hold_ms, start_at = int(argv[5]), int(argv[6]), int(argv[7])
        result = contend(proxy, backends, name, rounds, hold_ms, start_at)
    elif mode == "contend-noexpiry":
        rounds, hold_ms, start_at = int(argv[5]), int(argv[6]), int(argv[7])
        result = contend(proxy, backends, name, rounds, hold_ms, start_at, timeout=None)
    elif mode == "scenario":
        result = scenario(proxy, backends, name)
    elif mode == "noexpiry":
        result = noexpiry(proxy, backends, name)
    elif mode == "pipeline":
        result = pipeline(proxy, backends, name)
    else:
        raise SystemExit("unknown mode " + mode)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv)
