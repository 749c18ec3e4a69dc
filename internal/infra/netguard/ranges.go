package netguard

import "net/netip"

// Names of the address ranges Restricted refuses, as BlockedError.Range
// gives them (for logs; the model is told less).
const (
	RangeLoopback      = "loopback"
	RangePrivate       = "private"
	RangeLinkLocal     = "link-local"
	RangeShared        = "shared address space (CGNAT)"
	RangeMulticast     = "multicast"
	RangeUnspecified   = "unspecified"
	RangeBroadcast     = "broadcast"
	RangeReserved      = "reserved"
	RangeDocumentation = "documentation"
	RangeBenchmarking  = "benchmarking"
	RangeProtocol      = "IETF protocol assignments"
	RangeRelay         = "6to4 relay anycast"
	RangeUniqueLocal   = "unique local"
	RangeNotGlobal     = "not global unicast"
	RangeTeredo        = "Teredo tunnel"
	RangeInvalid       = "invalid address"
)

// rangeEntry is one refused prefix.
type rangeEntry struct {
	prefix netip.Prefix
	name   string
}

// restricted4 lists the IPv4 ranges that are not public internet
// addresses (RFC 6890 and its updates). Order matters only for the name
// reported: the more specific prefixes come first.
var restricted4 = []rangeEntry{
	{netip.MustParsePrefix("0.0.0.0/32"), RangeUnspecified},
	{netip.MustParsePrefix("0.0.0.0/8"), RangeReserved}, // "this network"
	{netip.MustParsePrefix("10.0.0.0/8"), RangePrivate},
	{netip.MustParsePrefix("100.64.0.0/10"), RangeShared},
	{netip.MustParsePrefix("127.0.0.0/8"), RangeLoopback},
	{netip.MustParsePrefix("169.254.0.0/16"), RangeLinkLocal}, // incl. cloud metadata 169.254.169.254
	{netip.MustParsePrefix("172.16.0.0/12"), RangePrivate},
	{netip.MustParsePrefix("192.0.0.0/24"), RangeProtocol},
	{netip.MustParsePrefix("192.0.2.0/24"), RangeDocumentation},
	{netip.MustParsePrefix("192.88.99.0/24"), RangeRelay},
	{netip.MustParsePrefix("192.168.0.0/16"), RangePrivate},
	{netip.MustParsePrefix("198.18.0.0/15"), RangeBenchmarking},
	{netip.MustParsePrefix("198.51.100.0/24"), RangeDocumentation},
	{netip.MustParsePrefix("203.0.113.0/24"), RangeDocumentation},
	{netip.MustParsePrefix("224.0.0.0/4"), RangeMulticast},
	{netip.MustParsePrefix("255.255.255.255/32"), RangeBroadcast},
	{netip.MustParsePrefix("240.0.0.0/4"), RangeReserved},
}

// IPv6 prefixes with special handling.
var (
	// globalUnicast6 is 2000::/3: every public IPv6 address is in it. An
	// address outside it is refused unless it embeds an IPv4 address that is
	// itself public (IPv4-mapped, NAT64).
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	// nat64 is the well-known NAT64 prefix (RFC 6052): the IPv4 address is in
	// the last 32 bits.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// sixToFour is 6to4 (RFC 3056): the IPv4 address is in bits 16-47.
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// restricted6 lists the ranges inside 2000::/3 that are not public.
var restricted6 = []rangeEntry{
	{netip.MustParsePrefix("2001::/32"), RangeTeredo}, // embeds an obfuscated IPv4 address
	{netip.MustParsePrefix("2001:db8::/32"), RangeDocumentation},
	{netip.MustParsePrefix("2001::/23"), RangeProtocol},
	{netip.MustParsePrefix("3fff::/20"), RangeDocumentation},
}

// Restricted reports whether addr is outside the public internet, and names
// its range: loopback, private (RFC 1918, unique local fc00::/7), link-local
// (169.254.0.0/16, fe80::/10), shared CGNAT space, multicast, unspecified,
// broadcast, documentation, benchmarking and other reserved IPv4 ranges, any
// IPv6 address outside global unicast 2000::/3, Teredo, and the IPv4-mapped
// (::ffff:a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) forms of a
// restricted IPv4 address. A zone (fe80::1%eth0) is ignored. The invalid
// zero Addr is restricted.
func Restricted(addr netip.Addr) (rangeName string, restricted bool) {
	if !addr.IsValid() {
		return RangeInvalid, true
	}
	addr = addr.WithZone("").Unmap()
	if addr.Is4() {
		for _, r := range restricted4 {
			if r.prefix.Contains(addr) {
				return r.name, true
			}
		}
		return "", false
	}
	switch {
	case addr.IsUnspecified():
		return RangeUnspecified, true
	case addr.IsLoopback():
		return RangeLoopback, true
	case addr.IsLinkLocalUnicast():
		return RangeLinkLocal, true
	case addr.IsMulticast():
		return RangeMulticast, true
	case addr.IsPrivate():
		return RangeUniqueLocal, true
	case nat64.Contains(addr):
		b := addr.As16()
		return embedded4(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	case sixToFour.Contains(addr):
		b := addr.As16()
		return embedded4(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
	case !globalUnicast6.Contains(addr):
		return RangeNotGlobal, true
	}
	for _, r := range restricted6 {
		if r.prefix.Contains(addr) {
			return r.name, true
		}
	}
	return "", false
}

// embedded4 checks the IPv4 address an IPv6 translation form carries.
func embedded4(v4 netip.Addr) (string, bool) {
	if name, bad := Restricted(v4); bad {
		return name + " (embedded in IPv6)", true
	}
	return "", false
}
