// Package resp is the one codec of RESP as it flows between the proxy and
// its backends: the commands the proxy sends and the replies a backend
// sends back, RESP2 and RESP3 alike. It knows nothing of connections; the
// pipelined connection (package redlock) and the relay's RESP3
// connections (package redlock/relay) both encode and read with it.
//
// Encoding (write.go): a command is an array of bulk strings. AppendCommand
// takes its arguments as string, []byte, int or int64 (anything else is
// written as fmt.Sprint gives it); AppendBulk and AppendBulkInt let a
// caller that knows its command's shape write it without boxing.
//
// Reading (read.go): Read reads one reply, of either protocol, as a value:
//
//	'+' simple string           Status
//	'-' '!' error               Error (a value, not Read's error)
//	':' integer                 int64
//	'$' bulk, '=' verbatim      string (a verbatim string without "txt:")
//	',' double, '(' big number  string
//	'#' boolean                 bool
//	'_' null, $-1, *-1          nil
//	'*' array, '~' set          []any
//	'%' map                     []any: key, value, key, value, …
//	'>' push                    Push
//	'|' attribute               read and dropped; the value after it is returned
//
// Read's error is for what is not a reply: the connection's failure, or a
// protocol error (ErrProtocol) for bytes that are not RESP, a missing CRLF,
// or a length below -1 or above MaxLen. A protocol error leaves the stream
// at an unknown place: the caller closes the connection. A well-framed
// reply past the reader's bounds, nested deeper than maxDepth or holding
// more than MaxReply, is read to its end, its frames counted and dropped
// rather than kept, and Read returns ErrTooDeep or ErrTooLarge (Skipped):
// the stream is at the next reply, and the error is the caller's. A declared length is never trusted for memory up front:
// an array's elements are allocated as they arrive beyond a small start,
// so a backend that declares a huge array and sends little costs little.
package resp
