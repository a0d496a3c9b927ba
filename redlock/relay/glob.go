package relay

// GlobMatch reports whether s matches the Redis glob pattern (PSUBSCRIBE,
// PUBSUB CHANNELS, KEYS): * any run of bytes, ? one byte, [abc] [^abc]
// [a-z] a class, \x the byte x. It compares bytes, case-sensitively, and
// backtracks to the last star only, so it runs in O(len(pattern) ×
// len(s)) whatever the pattern.
func GlobMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		if p < len(pattern) {
			switch pattern[p] {
			case '*':
				star, mark = p, i
				p++
				continue
			default:
				if n, ok := matchOne(pattern, p, s[i]); ok {
					p, i = n, i+1
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		mark++
		p, i = star+1, mark
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// matchOne matches the single-byte element of pattern at p (a byte, ?, a
// class, an escape) against c, returning the position after the element.
func matchOne(pattern string, p int, c byte) (int, bool) {
	switch pattern[p] {
	case '?':
		return p + 1, true
	case '\\':
		if p+1 < len(pattern) {
			return p + 2, pattern[p+1] == c
		}
		return p + 1, c == '\\'
	case '[':
		q := p + 1
		not := q < len(pattern) && pattern[q] == '^'
		if not {
			q++
		}
		match := false
		for q < len(pattern) && pattern[q] != ']' {
			switch {
			case pattern[q] == '\\' && q+1 < len(pattern):
				q++
				match = match || pattern[q] == c
			case q+2 < len(pattern) && pattern[q+1] == '-' && pattern[q+2] != ']':
				lo, hi := pattern[q], pattern[q+2]
				if lo > hi {
					lo, hi = hi, lo
				}
				match = match || (lo <= c && c <= hi)
				q += 2
			default:
				match = match || pattern[q] == c
			}
			q++
		}
		if q < len(pattern) {
			q++ // the closing ]
		}
		return q, match != not
	}
	return p + 1, pattern[p] == c
}
