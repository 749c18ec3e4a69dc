package netguard

import (
	"net/netip"
	"testing"
)

func TestRestricted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want string // "" for a public address
	}{
		// IPv4 special ranges.
		{"0.0.0.0", RangeUnspecified},
		{"0.1.2.3", RangeReserved},
		{"10.0.0.1", RangePrivate},
		{"10.255.255.255", RangePrivate},
		{"100.64.0.1", RangeShared},
		{"100.127.255.255", RangeShared},
		{"127.0.0.1", RangeLoopback},
		{"127.1.2.3", RangeLoopback},
		{"169.254.169.254", RangeLinkLocal},
		{"169.254.0.1", RangeLinkLocal},
		{"172.16.0.1", RangePrivate},
		{"172.31.255.255", RangePrivate},
		{"192.0.0.8", RangeProtocol},
		{"192.0.2.10", RangeDocumentation},
		{"192.88.99.1", RangeRelay},
		{"192.168.1.1", RangePrivate},
		{"198.18.0.1", RangeBenchmarking},
		{"198.19.255.255", RangeBenchmarking},
		{"198.51.100.7", RangeDocumentation},
		{"203.0.113.9", RangeDocumentation},
		{"224.0.0.1", RangeMulticast},
		{"239.255.255.250", RangeMulticast},
		{"240.0.0.1", RangeReserved},
		{"255.255.255.255", RangeBroadcast},
		// Public IPv4, including the neighbours of the ranges above.
		{"1.1.1.1", ""},
		{"8.8.8.8", ""},
		{"9.255.255.255", ""},
		{"11.0.0.1", ""},
		{"100.63.255.255", ""},
		{"100.128.0.1", ""},
		{"172.15.255.255", ""},
		{"172.32.0.1", ""},
		{"192.167.255.255", ""},
		{"198.17.255.255", ""},
		{"198.20.0.1", ""},
		{"223.255.255.255", ""},
		// IPv6.
		{"::", RangeUnspecified},
		{"::1", RangeLoopback},
		{"fe80::1", RangeLinkLocal},
		{"fe80::1%eth0", RangeLinkLocal},
		{"ff02::1", RangeMulticast},
		{"fc00::1", RangeUniqueLocal},
		{"fd12:3456::1", RangeUniqueLocal},
		{"fec0::1", RangeNotGlobal},     // deprecated site-local
		{"100::1", RangeNotGlobal},      // discard-only
		{"::127.0.0.1", RangeNotGlobal}, // IPv4-compatible, deprecated
		{"64:ff9b:1::1", RangeNotGlobal},
		{"2001::1", RangeTeredo},
		{"2001:db8::1", RangeDocumentation},
		{"2001:2::1", RangeProtocol},
		{"3fff::1", RangeDocumentation},
		{"2606:4700:4700::1111", ""},
		{"2a00:1450:4001::200e", ""},
		// IPv4 in IPv6 forms: judged by the IPv4 address they carry.
		{"::ffff:127.0.0.1", RangeLoopback},
		{"::ffff:10.0.0.1", RangePrivate},
		{"::ffff:169.254.169.254", RangeLinkLocal},
		{"::ffff:0.0.0.0", RangeUnspecified},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::7f00:1", RangeLoopback + " (embedded in IPv6)"},
		{"64:ff9b::a9fe:a9fe", RangeLinkLocal + " (embedded in IPv6)"},
		{"64:ff9b::808:808", ""},
		{"2002:7f00:1::1", RangeLoopback + " (embedded in IPv6)"},
		{"2002:a00:1::", RangePrivate + " (embedded in IPv6)"},
		{"2002:808:808::1", ""},
	}
	for _, tc := range tests {
		got, bad := Restricted(netip.MustParseAddr(tc.addr))
		if got != tc.want || bad != (tc.want != "") {
			t.Errorf("Restricted(%s) = %q, %v; want %q, %v", tc.addr, got, bad, tc.want, tc.want != "")
		}
	}
	if _, bad := Restricted(netip.Addr{}); !bad {
		t.Error("the zero Addr is not restricted")
	}
}

func TestCheckAllowCIDRs(t *testing.T) {
	t.Parallel()
	g := &Guard{AllowCIDRs: []netip.Prefix{
		netip.MustParsePrefix("127.0.0.1/32"),
		netip.MustParsePrefix("10.1.0.0/16"),
		netip.MustParsePrefix("fd00::/8"),
	}}
	tests := []struct {
		addr    string
		allowed bool
	}{
		{"127.0.0.1", true},
		{"::ffff:127.0.0.1", true}, // the mapped form of an allowed address
		{"127.0.0.2", false},
		{"10.1.2.3", true},
		{"10.2.0.1", false},
		{"fd00::5", true},
		{"fc00::5", false},
		{"169.254.169.254", false},
		{"8.8.8.8", true}, // public
	}
	for _, tc := range tests {
		err := g.Check(netip.MustParseAddr(tc.addr))
		if (err == nil) != tc.allowed {
			t.Errorf("Check(%s) = %v, want allowed %v", tc.addr, err, tc.allowed)
		}
	}
}
