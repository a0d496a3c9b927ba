package conf

import (
	"net"
	"strconv"
)

// The proxy tier's keys (announce, service_name): how clients reach this
// proxy, and the name its SENTINEL commands answer for (redlock/tier).

// maxServiceName bounds service_name, in bytes.
const maxServiceName = 128

// announce checks announce: "" (derive it from listen), or host:port with
// a host clients can dial (not a wildcard) and a port in [1, 65535].
func (v *validator) announce(s string) {
	if s == "" {
		return
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		v.fail("announce", strconv.Quote(s), "must be host:port")
		return
	}
	if wildcardHost(host) {
		v.fail("announce", strconv.Quote(s), "must name a host clients can reach, not a wildcard address")
		return
	}
	if _, err := parsePort(port, false); err != nil {
		v.fail("announce", strconv.Quote(s), "port "+err.Error())
	}
}

// serviceName checks service_name: 1 to 128 printable ASCII bytes without
// spaces (+switch-master separates its fields by spaces).
func (v *validator) serviceName(s string) {
	ok := len(s) >= 1 && len(s) <= maxServiceName
	for i := 0; ok && i < len(s); i++ {
		ok = s[i] > ' ' && s[i] < 0x7f
	}
	if !ok {
		v.fail("service_name", strconv.Quote(s), "must be 1 to "+strconv.Itoa(maxServiceName)+" printable ASCII characters without spaces")
	}
}

// wildcardHost reports a listen host that means every interface.
func wildcardHost(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// EffectiveAnnounce is the address this proxy announces to the tier:
// announce when set; otherwise the listen host with the port actually
// bound (bound is the listener's address, for listen = "host:0"); "" when
// listen is a wildcard, since no one address reaches every interface:
// the proxy then takes no part in discovery (Warnings says so).
func (c Config) EffectiveAnnounce(bound string) string {
	if c.Announce != "" {
		return c.Announce
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil || wildcardHost(host) {
		return ""
	}
	if _, bp, err := net.SplitHostPort(bound); err == nil && bp != "" {
		port = bp
	}
	return net.JoinHostPort(host, port)
}
