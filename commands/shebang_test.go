package commands

import "testing"

// TestScriptShebangs: a shebang Redis 7 refuses is refused by SCRIPT LOAD
// and EVAL with Redis's error, after the numkeys check as there, and the
// text is not kept (EVALSHA: NOSCRIPT). Before, SCRIPT LOAD of
// "#!lua flags=bogus" answered a SHA1. (The test backends, miniredis, run
// no shebang script: tests/scripts_shebang_test.go runs valid ones.)
func TestScriptShebangs(t *testing.T) {
	d, _ := newTestDispatcher(t, 3, "")
	c := d.NewClient("127.0.0.1:1", "127.0.0.1:2")
	const bogus = "#!lua flags=bogus\nreturn 1"
	runAll(t, d, c, []run{
		{[]string{"SCRIPT", "LOAD", bogus}, "-ERR Unexpected flag in script shebang: bogus\r\n"},
		{[]string{"EVAL", bogus, "0"}, "-ERR Unexpected flag in script shebang: bogus\r\n"},
		{[]string{"EVAL", bogus, "1"}, "-ERR Number of keys can't be greater than number of args\r\n"},
		{[]string{"EVALSHA", sha1Of(bogus), "0"}, "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
		{[]string{"SCRIPT", "EXISTS", sha1Of(bogus)}, "*1\r\n:0\r\n"},
		{[]string{"EVAL", "#!lua name=x\nreturn 1", "0"}, "-ERR Unknown lua shebang option: name=x\r\n"},
		{[]string{"EVAL", "#! lua\nreturn 1", "0"}, "-ERR Unexpected engine in script shebang: #!\r\n"},
		{[]string{"EVAL", "#!lua", "0"}, "-ERR Invalid script shebang\r\n"},
		{[]string{"EVAL", "#!lua flags=bogus\nreturn (", "0"}, "-ERR Unexpected flag in script shebang: bogus\r\n"},
	})
}
