package record

import (
	"context"
	"fmt"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/resp"
	"github.com/redlock-proxy/redlock-proxy/redlock/script"
)

// Evaler runs a script on one backend: package redlock's Node.
type Evaler interface {
	Eval(ctx context.Context, s *script.Script, keys []string, args ...any) (any, error)
}

// Scanned is a hold as one scan found it, or as a quorum of scans agree:
// Lease is how long the key's copy lives (a quorum's copies, at least).
type Scanned struct {
	Field
	Lease time.Duration
}

// Scan reads the record of service on n page by page, each page within
// timeout, so that no call holds a backend for the whole record (a
// record of thousands of holds took tens of milliseconds in one script,
// past the node timeout, and every backend was marked down). It returns
// each field whose key holds the value of its digest, in the copy it
// stamped, with the key's PTTL there; the script drops the other fields
// (dropHold). A field HSCAN returns twice is one hold, as read last;
// one that does not parse is not ours to read and is left alone. The
// pages are not one snapshot: a field changed between pages is read in
// either state.
func Scan(ctx context.Context, n Evaler, service string, timeout time.Duration) ([]Scanned, error) {
	var items []any
	cursor := "0"
	for {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		v, err := n.Eval(cctx, scanScript, Keys(service), cursor)
		cancel()
		if err != nil {
			return nil, err
		}
		page, ok := v.([]any)
		if !ok || len(page) == 0 {
			return nil, fmt.Errorf("scan holds: page %T", v)
		}
		if cursor, ok = page[0].(string); !ok {
			return nil, fmt.Errorf("scan holds: cursor %T", page[0])
		}
		items = append(items, page[1:]...)
		if cursor == "0" {
			return decodeScan(items)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// decodeScan reads one node's scan, its pages' items in one list: each
// hold with its key's PTTL there, once (HSCAN may return a field twice).
func decodeScan(a []any) ([]Scanned, error) {
	if len(a)%3 != 0 {
		return nil, fmt.Errorf("scan holds: %d items", len(a))
	}
	out := make([]Scanned, 0, len(a)/3)
	at := make(map[string]int, len(a)/3)
	for i := 0; i < len(a); i += 3 {
		k, _ := a[i].(string)
		f, _ := a[i+1].(string)
		ms, ok := a[i+2].(int64)
		if !ok {
			return nil, fmt.Errorf("scan holds: pttl %T", a[i+2])
		}
		h, err := Parse(k, f)
		if err != nil {
			continue // not ours to read: left alone
		}
		if j, ok := at[k]; ok {
			out[j] = Scanned{Field: h, Lease: resp.PTTL(ms)} // the later read
			continue
		}
		at[k] = len(out)
		out = append(out, Scanned{Field: h, Lease: resp.PTTL(ms)})
	}
	return out, nil
}
