package lua

import (
	"testing"
	"time"
)

// sandboxRun runs src once in a sandbox, with no keys and no arguments,
// and returns its reply: an error Value for an error the script raised.
func sandboxRun(t *testing.T, src string) Value {
	t.Helper()
	a := Analyze([]byte(src))
	if a.proto == nil {
		t.Fatalf("%s: not compiled: %v", src, a.Problem)
	}
	sb := getSandbox(runSteps, time.Now().Add(evalTime))
	defer putSandbox(sb)
	sb.st.reset()
	v, re := sb.run(a.proto, nil, nil, evalBytes)
	if re != nil {
		if !re.raised {
			t.Fatalf("%s: the sandbox gave up: %v", src, re.err)
		}
		return ErrorValue(re.msg)
	}
	return v
}

// TestNumbersAsLua51: the sandbox converts numbers to strings and back as
// Redis's Lua 5.1 does ("%.14g", strtod, lstrlib's string.format), not as
// gopher-lua does. Every want is what redis-server 7.0.15 (x86-64, glibc)
// answered to the same EVAL; its errors end in " script: <sha>, on
// @user_script:1.", which the proxy's EVAL adds.
func TestNumbersAsLua51(t *testing.T) {
	cases := []struct {
		src  string
		want Value
	}{
		{"return tostring(1/3)", BulkValue("0.33333333333333")},
		{"return tostring(0.1+0.2)", BulkValue("0.3")},
		{"return tostring(1e15)", BulkValue("1e+15")},
		{"return 1e14 .. ''", BulkValue("1e+14")},
		{"return 2^53 .. ''", BulkValue("9.007199254741e+15")},
		{"return string.format('%s',1e15)", BulkValue("1e+15")},
		{"return tostring(-0.0)", BulkValue("-0")},
		{"return tostring(1/0)", BulkValue("inf")},
		{"return tostring(-1/0)", BulkValue("-inf")},
		{"return tostring(math.huge)", BulkValue("inf")},
		{"return tostring(0/0)", BulkValue("-nan")},
		{"return tostring(-(0/0))", BulkValue("nan")},
		{"return tonumber('1e2')", IntValue(100)},
		{"return string.format('%d','x')", ErrorValue("ERR user_script:1: bad argument #2 to 'format' (number expected, got string)")},
		{"return string.format('%a',1)", ErrorValue("ERR user_script:1: invalid option '%a' to 'format'")},
		{"return string.format('%d')", ErrorValue("ERR user_script:1: bad argument #2 to 'format' (no value)")},
		{"return string.format('%s',nil)", ErrorValue("ERR user_script:1: bad argument #2 to 'format' (string expected, got nil)")},
		{"return string.format('%x',-1)", BulkValue("ffffffffffffffff")},
		{"return string.format('%q','a\\nb\\0')", BulkValue("\"a\\\nb\\000\"")},
		{"return string.format('%5.1f|%-5d|%05d|%+d|% d|%#x|%#o|%e|%E|%g|%G|%i|%u|%c|%%', 3.14159, 42, -42, 5, 5, 255, 8, 12345.678, 0.000123, 1e20, 1e-10, 7, 3, 65)", BulkValue("  3.1|42   |-0042|+5| 5|0xff|010|1.234568e+04|1.230000E-04|1e+20|1E-10|7|3|A|%")},
		{"return string.format('%#x|%x|%X|%o|%u', 0, 1e19, 1e20, -1.5, -1)", BulkValue("0|8ac7230489e80000|0|1777777777777777777777|18446744073709551615")},
		{"return string.format('%d|%d|%d', 1e20, -1e20, 2^63)", BulkValue("-9223372036854775808|-9223372036854775808|-9223372036854775808")},
		{"return string.format('%5s|%-5s|%.2s|%5.1s|', 'ab', 'ab', 'abc', 'xyz')", BulkValue("   ab|ab   |ab|    x|")},
		{"return string.format('%c', 0) .. '|'", BulkValue("|")},
		{"return string.format('%s|', 'a\\0b')", BulkValue("a|")},
		{"return string.format('%1000d', 1)", ErrorValue("ERR user_script:1: invalid format (width or precision too long)")},
		{"return string.format('%123d', 1)", ErrorValue("ERR user_script:1: invalid format (width or precision too long)")},
		{"return string.format('%99.99f', 1)", BulkValue("1.000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000")},
		{"return string.format('%------d', 1)", ErrorValue("ERR user_script:1: invalid format (repeated flags)")},
		{"return string.format('%-----d|', 1)", BulkValue("1|")},
		{"return string.format('%', 1)", ErrorValue("ERR user_script:1: invalid option '%' to 'format'")},
		{"return string.format('%5.1f|%f|%e|%g|%5g|%05g|%+g', 1/0, -1/0, 0/0, -(0/0), 1/0, -1/0, 1/0)", BulkValue("  inf|-inf|-nan|nan|  inf| -inf|+inf")},
		{"return string.format('%d', '10')", BulkValue("10")},
		{"return string.format('%s %s', 1/3, 2^53)", BulkValue("0.33333333333333 9.007199254741e+15")},
		{"return string.format('%q', 1/3)", BulkValue("\"0.33333333333333\"")},
		{"return string.format('%q', '\\r\\\\\\\\\\\"x')", BulkValue("\"\\r\\\\\\\\\\\"x\"")},
		{"return tonumber('0x10')", IntValue(16)},
		{"return tonumber(' 10 ')", IntValue(10)},
		{"return tonumber('10', 16)", IntValue(16)},
		{"return tonumber('ff', 16)", IntValue(255)},
		{"return tonumber('zz', 36)", IntValue(1295)},
		{"return tonumber(' 11 ', 2)", IntValue(3)},
		{"return tonumber('0x1p4')", IntValue(16)},
		{"return tostring(tonumber('inf'))", BulkValue("inf")},
		{"return tostring(tonumber('nan'))", BulkValue("nan")},
		{"return tostring(tonumber('-nan'))", BulkValue("-nan")},
		{"return tostring(tonumber('1e500'))", BulkValue("inf")},
		{"return tostring(tonumber('0x'))", BulkValue("nil")},
		{"return tostring(tonumber('1e'))", BulkValue("nil")},
		{"return tostring(tonumber('10\\0abc'))", BulkValue("10")},
		{"return tostring(tonumber(''))", BulkValue("nil")},
		{"return tostring(tonumber('  '))", BulkValue("nil")},
		{"return tostring(tonumber('10', 99))", ErrorValue("ERR user_script:1: bad argument #2 to 'tonumber' (base out of range)")},
		{"return tostring(tonumber('-10', 16))", BulkValue("1.844674407371e+19")},
		{"return tostring(tonumber('1.5', 10))", BulkValue("1.5")},
		{"return tostring(tonumber('0x10', 16))", BulkValue("16")},
		{"return tostring(tonumber('0b11'))", BulkValue("nil")},
		{"return tostring(tonumber('1_000'))", BulkValue("nil")},
		{"return tostring(tonumber('.5'))", BulkValue("0.5")},
		{"return tostring(tonumber('5.'))", BulkValue("5")},
		{"return tostring(tonumber('\\v5\\f'))", BulkValue("5")},
		{"return table.concat({1/3, 2^53, 1e15, -0.0}, ',')", BulkValue("0.33333333333333,9.007199254741e+15,1e+15,-0")},
		{"return table.concat({1,2}, ',', 1, 3)", ErrorValue("ERR user_script:1: invalid value (nil) at index 3 in table for 'concat'")},
		{"return string.rep(1/3, 2)", BulkValue("0.333333333333330.33333333333333")},
		{"return string.len(1e15)", IntValue(5)},
		{"return string.upper(1/0)", BulkValue("INF")},
		{"return ('x'):rep(2) .. 1e100", BulkValue("xx1e+100")},
		{"return tostring(1e100)", BulkValue("1e+100")},
		{"return tostring(123456789012345678)", BulkValue("1.2345678901235e+17")},
		{"return tostring(-1.5e-7)", BulkValue("-1.5e-07")},
		{"return tostring(2^63)", BulkValue("9.2233720368548e+18")},
		{"return tostring(100)", BulkValue("100")},
		{"return tostring(1e-5)", BulkValue("1e-05")},
		{"return tostring(0.1)", BulkValue("0.1")},
		{"return string.format('%.3g|%#g|%#.3g|%g|%g', 1234.5, 1, 100, 100000, 1000000)", BulkValue("1.23e+03|1.00000|100.|100000|1e+06")},
		{"return string.format('%.0f|%.0f|%.0f|%.0e', 0.5, 1.5, 2.5, 2.5)", BulkValue("0|2|2|2e+00")},
		{"return string.format('%#.0f|%#.0e|%#o|%#X', 1, 1, 0, 255)", BulkValue("1.|1.e+00|0|0XFF")},
		{"return string.format('%.0d|%.3d|%5.3d|%-5.3d|%05.3d', 0, 5, 5, 5, 5)", BulkValue("|005|  005|005  |  005")},
		{"return string.format('% x|%+x|%+u', 255, 255, 3)", BulkValue("ff|ff|3")},
		{"return string.format('%c%c', 256+65, -191)", BulkValue("AA")},
		{"return string.format('%x', 0/0)", BulkValue("8000000000000000")},
		{"return string.format('%d', 0/0)", BulkValue("-9223372036854775808")},
		{"return string.format('%x', 2^64)", BulkValue("0")},
		{"return string.format('%x', -2^63)", BulkValue("8000000000000000")},
		{"return string.format('%s', {})", ErrorValue("ERR user_script:1: bad argument #2 to 'format' (string expected, got table)")},
		{"return string.format('%d', {})", ErrorValue("ERR user_script:1: bad argument #2 to 'format' (number expected, got table)")},
		{"return string.format('%d', true)", ErrorValue("ERR user_script:1: bad argument #2 to 'format' (number expected, got boolean)")},
		{"return string.format('%s')", ErrorValue("ERR user_script:1: bad argument #2 to 'format' (no value)")},
		{"return string.format()", ErrorValue("ERR user_script:1: bad argument #1 to 'format' (string expected, got no value)")},
		{"return string.format(12)", BulkValue("12")},
		{"return string.format('%5%')", ErrorValue("ERR user_script:1: bad argument #2 to 'format' (no value)")},
		{"return string.format('%q')", ErrorValue("ERR user_script:1: bad argument #2 to 'format' (no value)")},
		{"return string.format('%w', 1)", ErrorValue("ERR user_script:1: invalid option '%w' to 'format'")},
		{"return string.format('%s', 'x', 'extra')", BulkValue("x")},
		{"return tostring(-1e15)", BulkValue("-1e+15")},
		{"return tostring(1e16)", BulkValue("1e+16")},
		{"return tostring(12345678901234)", BulkValue("12345678901234")},
		{"return tostring(123456789012345)", BulkValue("1.2345678901234e+14")},
		{"return tostring(5e-324)", BulkValue("4.9406564584125e-324")},
		{"return tostring(1.7976931348623157e308)", BulkValue("1.7976931348623e+308")},
		{"return string.format('%.14g|%.20f|%.99e', 0.1, 0.1, 1)", BulkValue("0.1|0.10000000000000000555|1.000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000e+00")},
		{"return string.format('%5c|%-3c|', 65, 66)", BulkValue("    A|B  |")},
		{"return string.format('%x|%X|%o', 3.9, -3.9, 2^63)", BulkValue("3|FFFFFFFFFFFFFFFD|1000000000000000000000")},
		{"return (1/3) .. (2/3)", BulkValue("0.333333333333330.66666666666667")},
		{"return 10 .. 20", BulkValue("1020")},
		{"return tostring(3) .. tostring(-3)", BulkValue("3-3")},
		{"return ('1e2' + 0) .. ''", BulkValue("100")},
		{"return tostring('0x10' * 1)", BulkValue("16")},
		{"return string.format('%q', 1e100)", BulkValue("\"1e+100\"")},
		{"return string.sub(12345, 2, 3)", BulkValue("23")},
		{"return string.format('%s', 1e300 * 1e10)", BulkValue("inf")},
		{"return string.format('%.3s|', 'a\\0bc')", BulkValue("a|")},
		{"return string.format('%5.2s|', 'a\\0bc')", BulkValue("    a|")},
		{"return error(1/3)", ErrorValue("ERR user_script:1: 0.33333333333333")},
		{"return string.format('%05s|%-05d|%+5s|', 'ab', 3, 'x')", BulkValue("   ab|3    |    x|")},
		{"return string.format('%5.3x|%#5x|%#.3o|%-#8X|', 255, 255, 8, 255)", BulkValue("  0ff| 0xff|010|0XFF    |")},
		{"return string.format('%+.3e|% .0f|%010.2f|%-10.2e|%+010g', 12345.6789, 2.5, -3.14159, 1e-300, 1e100)", BulkValue("+1.235e+04| 2|-000003.14|1.00e-300 |+0001e+100")},
		{"return string.format('%.0g|%#.0g|%g|%g|%G', 0, 0, 0.0001, 0.00001, 1e-100)", BulkValue("0|0.|0.0001|1e-05|1E-100")},
		{"return string.format('%g|%g|%.17g|%.20g', 123456, 1234567, 0.1, 2^63)", BulkValue("123456|1.23457e+06|0.10000000000000001|9223372036854775808")},
		{"return tostring(tonumber('  0x1A  '))", BulkValue("26")},
		{"return tostring(tonumber('1e+2'))", BulkValue("100")},
		{"return tostring(tonumber('- 1'))", BulkValue("nil")},
		{"return tostring(tonumber('+1'))", BulkValue("1")},
		{"return tostring(tonumber('infinity'))", BulkValue("inf")},
		{"return tostring(tonumber('nan(123)'))", BulkValue("nan")},
		{"return tostring(tonumber('0x.8'))", BulkValue("0.5")},
		{"return tostring(tonumber('1e-400'))", BulkValue("0")},
		{"return tostring(tonumber(true))", BulkValue("nil")},
		{"return tostring(tonumber())", ErrorValue("ERR user_script:1: bad argument #1 to 'tonumber' (value expected)")},
		{"return tostring(tonumber(nil))", BulkValue("nil")},
		{"return tostring(tonumber('z', 36))", BulkValue("35")},
		{"return tostring(tonumber(' ', 36))", BulkValue("nil")},
		{"return tostring(tonumber('99999999999999999999', 10))", BulkValue("1e+20")},
		{"return tostring(tonumber('99999999999999999999', 16))", BulkValue("1.844674407371e+19")},
		{"return tostring(tonumber('1.5', 16))", BulkValue("nil")},
		{"return tostring(tonumber(255, 16))", BulkValue("597")},
		{"return tostring(tonumber('10', '16'))", BulkValue("16")},
		{"return tostring(tonumber('10', 1))", ErrorValue("ERR user_script:1: bad argument #2 to 'tonumber' (base out of range)")},
		{"return tostring(tonumber('+ff', 16))", BulkValue("255")},
		{"return tostring(tonumber('-0x10', 16))", BulkValue("1.844674407371e+19")},
		{"return tostring(tonumber('0x10', 10))", BulkValue("16")},
		{"return table.concat({1, 'a', 2.5}, 1/2)", BulkValue("10.5a0.52.5")},
		{"return table.concat({1, {}, 2})", ErrorValue("ERR user_script:1: invalid value (table) at index 2 in table for 'concat'")},
		{"return table.concat({}, ',', 5)", BulkValue("")},
		{"return table.concat({1,2,3}, ',', 2)", BulkValue("2,3")},
		{"return string.format('%q', '\\1\\127\\255')", BulkValue("\"\x01\x7f\xff\"")},
		{"return ('x'):rep(3, 1)", BulkValue("xxx")},
		{"return tostring(1e15) .. (-0.0) .. (2^-1074)", BulkValue("1e+15-04.9406564584125e-324")},
		{"return string.format('%s', -0.0)", BulkValue("-0")},
		{"return string.format('%d', -0.0)", BulkValue("0")},
		{"return string.format('%.3f', -0.0)", BulkValue("-0.000")},
		{"return string.format('%i', 3.99)", BulkValue("3")},
		{"return string.format('%5.1%')", ErrorValue("ERR user_script:1: bad argument #2 to 'format' (no value)")},
		{"return string.format('%10.3s|', 1/3)", BulkValue("       0.3|")},
		{"return string.format('%.1f|%.2f|%.1f', 0.05, 0.125, 0.25)", BulkValue("0.1|0.12|0.2")},
		{"return string.format('%s', string.rep('a', 100) .. '\\0b') == string.rep('a', 100) .. '\\0b'", IntValue(1)},
		{"return assert(false, 1/3)", ErrorValue("ERR user_script:1: 0.33333333333333")},
		{"return assert(false, '100%')", ErrorValue("ERR user_script:1: 100%")},
		{"return assert(false)", ErrorValue("ERR user_script:1: assertion failed!")},
		{"return assert(nil, {})", ErrorValue("ERR user_script:1: bad argument #2 to 'assert' (string expected, got table)")},
		{"return assert()", ErrorValue("ERR user_script:1: bad argument #1 to 'assert' (value expected)")},
		{"return {assert(1, 2, 3)}", ArrayValue(IntValue(1), IntValue(2), IntValue(3))},
		{"return redis.sha1hex(1/3) == redis.sha1hex('0.33333333333333')", IntValue(1)},
	}
	for _, c := range cases {
		if got := sandboxRun(t, c.src); !got.Equal(c.want) {
			t.Errorf("%s\n got %v\nwant %v", c.src, got, c.want)
		}
	}
}
