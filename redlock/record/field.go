package record

import (
	"fmt"
	"strconv"
	"strings"
)

// reservedPrefix is package redlock's ReservedPrefix, repeated here
// (that package imports this one; a test there checks they agree).
const reservedPrefix = "redlock-proxy:"

// Key is the hash of the holds of the tier service.
func Key(service string) string { return reservedPrefix + "holds:" + service }

// Keys are the two hashes of the record of service, as its scripts take
// them: the record, and beside it the stamps, per held key, of its copy
// on that node: the absolute expiry (PEXPIRETIME, ms) the hold's last write
// gave it. A copy whose expiry differs was written since by someone else
// (deleted and taken again, overwritten with an expiry, given one): the
// hold is no longer its own, whatever value it holds. A field without a
// stamp is checked by its digest alone.
func Keys(service string) []string {
	return []string{Key(service), reservedPrefix + "holds-at:" + service}
}

// AnyDigest is the digest of a hold of any value: a key of any type,
// kept while it exists.
const AnyDigest = "*"

// Field is one field of the record: a hold as the backends keep it
// (lease.Hold is what a client asked for, in one proxy's memory).
type Field struct {
	Key      string
	Deadline int64  // the client's expiry, Unix ms; 0: none
	Digest   string // sha1 of the value held, hex; AnyDigest
}

// Encode is f's value in the record: "deadline digest".
func (f Field) Encode() string { return strconv.FormatInt(f.Deadline, 10) + " " + f.Digest }

// Valid reports whether f can be written to the record.
func (f Field) Valid() bool {
	return f.Key != "" && f.Digest != "" && !strings.Contains(f.Digest, " ")
}

// Parse reads the field of key whose value is s. A field an older proxy
// wrote ("owner deadline digest") reads as its deadline and digest; one
// it marked ended (owner "~") as no hold.
func Parse(key, s string) (Field, error) {
	p := strings.Fields(s)
	switch {
	case len(p) == 3 && p[0] != "~":
		p = p[1:]
	case len(p) != 2:
		return Field{}, fmt.Errorf("hold of %q: %q is not \"deadline digest\"", key, s)
	}
	d, err := strconv.ParseInt(p[0], 10, 64)
	if err != nil || d < 0 {
		return Field{}, fmt.Errorf("hold of %q: deadline %q", key, p[0])
	}
	return Field{Key: key, Deadline: d, Digest: p[1]}, nil
}
