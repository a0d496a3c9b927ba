# make test: install missing test prerequisites, then vet, run every test
# with the race detector, run the allocation budgets without it (the race
# detector makes sync.Pool drop items), and fuzz each parser briefly.
GO ?= go
# A count, not a duration: with a duration, Go 1.26's fuzzing coordinator
# can report its own deadline as a failure ("context deadline exceeded",
# no crasher; golang/go#75804, fixed in Go 1.27). 50000 runs are about
# 10 s here.
FUZZTIME ?= 50000x

.PHONY: test deps check unit short allocs fuzz run build bench bench-fill chaos

test: deps check unit allocs fuzz

deps:
	@bash .ci/deps.sh

check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...

# -parallel 4 (the default is GOMAXPROCS, 2 here): the end-to-end tests
# of ./tests mostly wait on ttls, leases and other processes (under half a
# core at 2, about one at 8), so 4 at once nearly halve the package's time
# (~450 s to ~265 s). No other package has parallel tests: the flag
# changes only ./tests. ./tests stays last in the order: run first, with
# the CPU-bound unit packages beside it, four runs of five had a backend
# call miss a short deadline (NOQUORUM at 5% of a 2-5 s ttl, in ./tests
# or commands), all while the two overlapped.
E2E_PARALLEL ?= 4
unit:
	$(GO) test -race -count=1 -timeout 20m -parallel $(E2E_PARALLEL) ./...

# The quick loop: every unit test, without the race detector, redis-server,
# node or python (the end-to-end tests skip under -short, saying what they
# need). Not part of make test.
short:
	$(GO) test -short ./...

allocs:
	$(GO) test -count=1 -run 'Allocs$$' ./redlock ./commands

fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzGuard -fuzztime=$(FUZZTIME) ./proxy
	$(GO) test -run='^$$' -fuzz=FuzzDispatch -fuzztime=$(FUZZTIME) ./commands

run:
	$(GO) run ./cmd/redlock-proxy -dev

build:
	$(GO) build -o redlock-proxy ./cmd/redlock-proxy

# The side-by-side lock benchmark of docs/benchmarks.md: proxy, proxy-setnx,
# proxy-mux, redsync and single-instance SET NX over five spawned backends,
# the legacy cycles (SETNX+DEL, SET NX+DEL, SET NX PX+DEL, SET+GET) through
# the proxy and on one backend, with the pipelined batch and the hand-offs.
bench:
	$(GO) run ./cmd/redlock-bench -spawn 5 -d 10s -c 1,16,64 -batch 64 -handoff 200

# Issue 33's benchmark (docs/benchmarks.md, "Data and holds under lock
# load"): LOCK/UNLOCK at 16 clients through one proxy, first with nothing
# else (the baseline, a second proxy idle), then after 100,000 data keys
# and 20,000 holds were written through a second proxy. A few minutes.
bench-fill:
	$(GO) run ./cmd/redlock-bench -spawn 5 -d 30s -c 16 -modes proxy -fill-data 0 -fill-holds 0
	$(GO) run ./cmd/redlock-bench -spawn 5 -d 30s -c 16 -modes proxy -fill-data 100000 -fill-holds 20000

# The mutual-exclusion checker under faults, for longer than make test runs
# it: proxy (must show no overlap) and redsync (shows the gap it leaves);
# and the linearizability checker of plain writes and reads.
CHAOS_DURATION ?= 2m
chaos:
	REDLOCK_CHAOS_DURATION=$(CHAOS_DURATION) $(GO) test -race -count=1 -v -timeout 15m -run '^(TestCheckerSynthetic|TestChaosProxy|TestChaosHolds|TestChaosVoteLocks|TestChaosRedsync|TestMigrateNoOverlap|TestLinearizable)$$' ./tests
