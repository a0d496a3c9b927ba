<?php
// PHP lock libraries from Debian against redlock-proxy, over phpredis,
// driven by tests/interop_php_test.go:
//   symfony  Symfony Lock 5.4 RedisStore (php-symfony-lock): sorted-set
//            scripts with TYPE and TIME, plain EVAL every time
//   laravel  Laravel 8 RedisLock (php-illuminate-cache): SET EX NX, or
//            SETNX without expiry when seconds is 0; release script
//   malkusch malkusch/lock 2.2 PHPRedisMutex (php-malkusch-lock): SET ex nx,
//            release script, spin lock
//
//   php locks.php <lib> contend  <proxy host:port> <backends> <name> <rounds> <hold-ms> <start-at-epoch-ms>
//   php locks.php <lib> scenario <proxy host:port> <backends> <name>
//
// Prints one JSON object. hrtime() is CLOCK_MONOTONIC: one clock for every
// process, so the Go side compares windows across workers.

declare(strict_types=1);

require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';
require_once '/usr/share/php/Illuminate/Cache/autoload.php';
require_once '/usr/share/php/Illuminate/Redis/autoload.php';
require_once '/usr/share/php/Malkusch/Lock/autoload.php';

use Illuminate\Cache\PhpRedisLock;
use Illuminate\Contracts\Cache\LockTimeoutException;
use Illuminate\Redis\Connections\PhpRedisConnection;
use malkusch\lock\exception\ExecutionOutsideLockException;
use malkusch\lock\exception\TimeoutException;
use malkusch\lock\mutex\PHPRedisMutex;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\Lock;
use Symfony\Component\Lock\Store\RedisStore;

function connect(string $addr): Redis
{
    [$host, $port] = explode(':', $addr);
    $r = new Redis();
    $r->connect($host, (int) $port, 10.0);
    $r->setOption(Redis::OPT_READ_TIMEOUT, 10.0);
    return $r;
}

function now(): string
{
    return (string) hrtime(true);
}

function ms(): int
{
    return (int) floor(microtime(true) * 1000);
}

/** The backends on which key holds value (a string key). */
function holders(array $backends, string $key, string $value): int
{
    $n = 0;
    foreach ($backends as $b) {
        if ($b->get($key) === $value) {
            $n++;
        }
    }
    return $n;
}

/** The backends whose sorted set at key has member. */
function members(array $backends, string $key, string $member): int
{
    $n = 0;
    foreach ($backends as $b) {
        if ($b->zScore($key, $member) !== false) {
            $n++;
        }
    }
    return $n;
}

/**
 * [count() now, count() once the proxy's background calls landed]: a
 * release answers when a quorum deleted; the rest follow within ~2 s.
 */
function settled(callable $count): array
{
    $first = $n = $count();
    $deadline = microtime(true) + 2;
    while ($n !== 0 && microtime(true) < $deadline) {
        usleep(20000);
        $n = $count();
    }
    return [$first, $n];
}

/** How many backends hold the value most of them hold at key. */
function agreeing(array $backends, string $key): int
{
    $counts = [];
    foreach ($backends as $b) {
        $v = $b->get($key);
        if ($v !== false) {
            $counts[$v] = ($counts[$v] ?? 0) + 1;
        }
    }
    return $counts ? max($counts) : 0;
}

/** Waits, for at most 10 s, until key is on no backend; whether it is. */
function waitExpired(array $backends, string $key): bool
{
    $deadline = microtime(true) + 10;
    for (;;) {
        $n = 0;
        foreach ($backends as $b) {
            $n += (int) $b->exists($key);
        }
        if ($n === 0) {
            return true;
        }
        if (microtime(true) > $deadline) {
            return false;
        }
        usleep(20000);
    }
}

function pttls(array $backends, string $key): array
{
    return array_map(fn ($b) => $b->pttl($key), $backends);
}

function outcome(callable $f): string
{
    try {
        $r = $f();
        return is_bool($r) ? ($r ? 'true' : 'false') : 'ok';
    } catch (Throwable $e) {
        return (new ReflectionClass($e))->getShortName() . ': ' . $e->getMessage();
    }
}

function waitUntil(int $startAt): void
{
    $delay = $startAt - ms();
    if ($delay > 0) {
        usleep($delay * 1000);
    }
}

// ---------------------------------------------------------------------------
// Symfony

function symfonyLock(RedisStore $store, string $name, float $ttl): array
{
    $key = new Key($name);
    return [$key, new Lock($key, $store, $ttl, false)];
}

function symfonyToken(Key $key): string
{
    return $key->getState(RedisStore::class);
}

function symfonyContend(Redis $proxy, array $backends, string $name, int $rounds, int $holdMs, int $startAt): array
{
    $store = new RedisStore($proxy);
    waitUntil($startAt);
    $windows = [];
    $min = null;
    for ($i = 0; $i < $rounds; $i++) {
        [$key, $lock] = symfonyLock($store, $name, 2.0);
        $lock->acquire(true); // polls every 100 ms ± 10
        $start = now();
        $h = members($backends, $name, symfonyToken($key));
        $min = $min === null ? $h : min($min, $h);
        $lock->refresh(2.0);
        usleep($holdMs * 1000);
        $end = now();
        $lock->release();
        $windows[] = [$start, $end];
        usleep($holdMs * 1000);
    }
    return ['windows' => $windows, 'min_holders' => $min];
}

function symfonyScenario(Redis $proxy, array $backends, string $name): array
{
    $out = [];
    $store = new RedisStore($proxy);
    [$key, $lock] = symfonyLock($store, $name, 3.0);
    $out['acquire'] = $lock->acquire();
    $token = symfonyToken($key);
    $out['holders'] = members($backends, $name, $token);
    $out['is_acquired'] = $lock->isAcquired();
    [, $other] = symfonyLock($store, $name, 3.0);
    $out['other_acquire'] = $other->acquire();
    $lock->refresh(6.0);
    $out['remaining_after_refresh'] = $lock->getRemainingLifetime();
    $out['pttls_after_refresh'] = pttls($backends, $name);
    $out['release'] = outcome(fn () => $lock->release());
    [$out['holders_after_release_now'], $out['holders_after_release']] = settled(fn () => members($backends, $name, $token));
    $out['exists_after_release'] = $proxy->exists($name);
    $out['other_acquire_after_release'] = $other->acquire();
    $out['other_release'] = outcome(fn () => $other->release());

    // Shared (read) locks: two readers at once, a writer waits for both.
    [$rk1, $r1] = symfonyLock($store, $name . ':rw', 3.0);
    [$rk2, $r2] = symfonyLock($store, $name . ':rw', 3.0);
    [, $w] = symfonyLock($store, $name . ':rw', 3.0);
    $out['read1'] = $r1->acquireRead();
    $out['read2'] = $r2->acquireRead();
    $out['readers'] = [members($backends, $name . ':rw', symfonyToken($rk1)), members($backends, $name . ':rw', symfonyToken($rk2))];
    $out['write_while_read'] = $w->acquire();
    $r1->release();
    $out['write_while_one_read'] = $w->acquire();
    $r2->release();
    $out['write_after_reads'] = $w->acquire();
    $w->release();

    // Release after expiry, once another owner holds it.
    [$sk, $short] = symfonyLock($store, $name, 2.0);
    $out['short_acquire'] = $short->acquire();
    $out['short_holders'] = members($backends, $name, symfonyToken($sk));
    $out['short_expired'] = waitExpired($backends, $name);
    $out['short_is_expired'] = $short->isExpired();
    [$nk, $next] = symfonyLock($store, $name, 3.0);
    $out['next_acquire'] = $next->acquire();
    $out['stale_refresh'] = outcome(fn () => $short->refresh(3.0));
    $out['stale_release'] = outcome(fn () => $short->release());
    $out['next_holders'] = members($backends, $name, symfonyToken($nk));
    $next->release();
    return $out;
}

// ---------------------------------------------------------------------------
// Laravel

function laravelLock(Redis $proxy, string $name, int $seconds, ?string $owner = null): PhpRedisLock
{
    return new PhpRedisLock(new PhpRedisConnection($proxy), $name, $seconds, $owner);
}

function laravelContend(Redis $proxy, array $backends, string $name, int $rounds, int $holdMs, int $startAt): array
{
    waitUntil($startAt);
    $windows = [];
    $min = null;
    for ($i = 0; $i < $rounds; $i++) {
        // No expiry (seconds = 0): SETNX, kept by the proxy until released.
        $lock = laravelLock($proxy, $name, 0)->betweenBlockedAttemptsSleepFor(20);
        $lock->block(20);
        $start = now();
        $h = holders($backends, $name, $lock->owner());
        $min = $min === null ? $h : min($min, $h);
        usleep($holdMs * 1000);
        $end = now();
        if (!$lock->release()) {
            return ['error' => 'release of a held lock returned false'];
        }
        $windows[] = [$start, $end];
        usleep($holdMs * 1000);
    }
    return ['windows' => $windows, 'min_holders' => $min];
}

function laravelScenario(Redis $proxy, array $backends, string $name): array
{
    $out = [];
    // Without expiry: held beyond the proxy's default_ttl (2 s), TTL -1.
    $lock = laravelLock($proxy, $name, 0);
    $out['acquire'] = $lock->acquire();
    $out['holders'] = holders($backends, $name, $lock->owner());
    $out['ttl'] = $proxy->ttl($name);
    $out['other_acquire'] = laravelLock($proxy, $name, 0)->acquire();
    usleep(5_000_000);
    $out['holders_after_5s'] = holders($backends, $name, $lock->owner());
    $out['ttl_after_5s'] = $proxy->ttl($name);
    $out['get_after_5s'] = $proxy->get($name) === $lock->owner();
    $out['other_acquire_after_5s'] = laravelLock($proxy, $name, 0)->acquire();
    $out['foreign_release'] = laravelLock($proxy, $name, 0, 'someone-else')->release();
    $out['release'] = $lock->release();
    [$out['holders_after_release_now'], $out['holders_after_release']] = settled(fn () => holders($backends, $name, $lock->owner()));
    $out['exists_after_release'] = $proxy->exists($name);
    $out['second_release'] = $lock->release();

    // With expiry: SET EX NX; a blocked waiter gets it when it expires.
    $timed = laravelLock($proxy, $name, 2);
    $out['timed_acquire'] = $timed->acquire();
    $out['timed_ttl'] = $proxy->ttl($name);
    $out['timed_holders'] = holders($backends, $name, $timed->owner());
    $waiter = laravelLock($proxy, $name, 5)->betweenBlockedAttemptsSleepFor(50);
    $t0 = microtime(true);
    $out['waiter_block'] = outcome(fn () => $waiter->block(8));
    $out['waiter_waited_ms'] = (int) ((microtime(true) - $t0) * 1000);
    $out['waiter_holders'] = holders($backends, $name, $waiter->owner());
    $out['timed_release_after_expiry'] = $timed->release();
    $out['waiter_holders_after_stale_release'] = holders($backends, $name, $waiter->owner());
    $out['short_block'] = outcome(fn () => laravelLock($proxy, $name, 5)->betweenBlockedAttemptsSleepFor(50)->block(1));
    $waiter->forceRelease();
    $out['exists_after_force_release'] = $proxy->exists($name);
    return $out;
}

// ---------------------------------------------------------------------------
// malkusch/lock

function malkuschContend(Redis $proxy, array $backends, string $name, int $rounds, int $holdMs, int $startAt): array
{
    waitUntil($startAt);
    $windows = [];
    $min = null;
    for ($i = 0; $i < $rounds; $i++) {
        $mutex = new PHPRedisMutex([$proxy], $name, 20);
        $mutex->synchronized(function () use ($backends, $name, $holdMs, &$windows, &$min): void {
            $start = now();
            $h = agreeing($backends, 'lock_' . $name);
            $min = $min === null ? $h : min($min, $h);
            usleep($holdMs * 1000);
            $windows[] = [$start, now()];
        });
        usleep($holdMs * 1000);
    }
    return ['windows' => $windows, 'min_holders' => $min];
}

function malkuschScenario(Redis $proxy, array $backends, string $name): array
{
    $out = [];
    $key = 'lock_' . $name;
    $out['result'] = (new PHPRedisMutex([$proxy], $name, 5))->synchronized(function () use ($proxy, $backends, $name, $key, &$out) {
        $out['holders'] = agreeing($backends, $key);
        $out['ttl'] = $proxy->ttl($key);
        // Another mutex times out while this one holds the lock.
        $out['other'] = outcome(fn () => (new PHPRedisMutex([$proxy], $name, 1))->synchronized(fn () => 'inside'));
        return 'inside';
    });
    $out['exists_after'] = $proxy->exists($key);
    // The holder overruns its timeout: the library refuses to release, and
    // the key expires on its own (timeout + 1 s).
    $out['overrun'] = outcome(fn () => (new PHPRedisMutex([$proxy], $name, 1))->synchronized(function () {
        usleep(1_500_000);
    }));
    $out['overrun_expired'] = waitExpired($backends, $key);
    return $out;
}

// ---------------------------------------------------------------------------

function main(array $argv): void
{
    [, $lib, $mode, $proxyAddr, $backendList, $name] = $argv;
    $proxy = connect($proxyAddr);
    $backends = array_map('connect', array_filter(explode(',', $backendList)));
    if ($mode === 'contend') {
        $fn = $lib . 'Contend';
        $out = $fn($proxy, $backends, $name, (int) $argv[6], (int) $argv[7], (int) $argv[8]);
    } elseif ($mode === 'scenario') {
        $fn = $lib . 'Scenario';
        $out = $fn($proxy, $backends, $name);
    } else {
        throw new InvalidArgumentException('unknown mode ' . $mode);
    }
    echo json_encode($out), "\n";
}

main($argv);
