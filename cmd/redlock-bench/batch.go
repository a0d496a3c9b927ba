package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"
)

// The -batch measurement: what pipelining on one connection buys. N
// `SET key value NX PX ttl` on N fresh keys are sent on one raw
// connection, once one after another (each waits for the reply before
// the next is written) and once all in one write before any reply is
// read. Each way is timed over batchRounds rounds, alternating, and the
// medians are compared. It runs through the proxy and, when a backend is
// known, on the first backend alone (what one Redis does with the same
// pipeline). The keys expire after the ttl.

// batchRounds is how many rounds each way is timed.
const batchRounds = 30

// batchResult is a -batch line of the report.
type batchResult struct {
	Target      string  `json:"target"` // "proxy" or "single"
	N           int     `json:"n"`
	Rounds      int     `json:"rounds"`
	OneByOneMS  float64 `json:"one_by_one_median_ms"`
	PipelinedMS float64 `json:"pipelined_median_ms"`
	Speedup     float64 `json:"speedup"` // OneByOneMS / PipelinedMS
}

func (r *batchResult) String() string {
	return fmt.Sprintf("batch (%s): %d SET NX PX on one connection, median of %d rounds: one at a time %.3f ms, pipelined %.3f ms: %.1f× faster",
		r.Target, r.N, r.Rounds, r.OneByOneMS, r.PipelinedMS, r.Speedup)
}

// measureBatch times n SET NX PX one at a time and pipelined on one
// connection to addr.
func measureBatch(ctx context.Context, target, addr string, n int, ttl time.Duration) (*batchResult, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-batch: %s: %w", target, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	r, w := bufio.NewReader(conn), bufio.NewWriter(conn)
	ms := strconv.FormatInt(ttl.Milliseconds(), 10)
	prefix := "bench:batch:" + newValue() + ":"

	var seq, pipe []time.Duration
	for round := range 2 * batchRounds {
		pipelined := round%2 == 1
		keyBase := prefix + strconv.Itoa(round) + ":"
		start := time.Now()
		for i := range n {
			writeCommand(w, "SET", keyBase+strconv.Itoa(i), "v", "NX", "PX", ms)
			if pipelined {
				continue
			}
			if err := w.Flush(); err != nil {
				return nil, fmt.Errorf("-batch: %s: %w", target, err)
			}
			if err := readOK(r); err != nil {
				return nil, fmt.Errorf("-batch: %s: %w", target, err)
			}
		}
		if pipelined {
			if err := w.Flush(); err != nil {
				return nil, fmt.Errorf("-batch: %s: %w", target, err)
			}
			for range n {
				if err := readOK(r); err != nil {
					return nil, fmt.Errorf("-batch: %s: %w", target, err)
				}
			}
			pipe = append(pipe, time.Since(start))
		} else {
			seq = append(seq, time.Since(start))
		}
	}
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2]) / float64(time.Millisecond)
	}
	res := &batchResult{Target: target, N: n, Rounds: batchRounds, OneByOneMS: median(seq), PipelinedMS: median(pipe)}
	if res.PipelinedMS > 0 {
		res.Speedup = res.OneByOneMS / res.PipelinedMS
	}
	return res, nil
}

// writeCommand buffers args as a RESP array of bulk strings.
func writeCommand(w *bufio.Writer, args ...string) {
	fmt.Fprintf(w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(w, "$%d\r\n%s\r\n", len(a), a)
	}
}

// readOK reads one reply line and wants +OK (a fresh key's SET NX).
func readOK(r *bufio.Reader) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+OK\r\n" {
		return fmt.Errorf("SET NX on a fresh key replied %q, want +OK", line)
	}
	return nil
}
