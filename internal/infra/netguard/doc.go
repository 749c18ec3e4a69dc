// Package netguard keeps tools that fetch URLs chosen by a model (or by a
// remote server's redirects) away from the operator's own network: it
// refuses connections to loopback, private, link-local (cloud metadata at
// 169.254.169.254 included), CGNAT, multicast, unspecified, broadcast and
// other reserved addresses, in their IPv4, IPv6, IPv4-mapped, NAT64 and
// 6to4 forms (see Restricted), unless an allow-list lets them through.
//
// The check is made when a connection is dialled, on the addresses the
// name resolved to, not on the URL: DNS names that point inside, DNS
// rebinding between a check and the connection, and redirects are all
// caught. DialContext resolves the host itself and dials only checked IP
// literals; Control checks the socket's address once more just before
// connect(2), so no packet reaches a refused address.
//
//	g := &netguard.Guard{
//		AllowHosts: []string{"search.internal:8888"},         // this host, this port
//		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("10.1.2.0/24")},
//	}
//	client := g.Client(30 * time.Second) // guarded dials, ≤ 5 redirects, http(s) only
//	resp, err := client.Get(url)
//	// err wraps a *netguard.BlockedError for a refused address; it is
//	// classify.Permanent and its message for the model says
//	// "the address of <host> is not allowed (private/loopback network)".
//
// A plain net.Dialer can use the address check alone:
//
//	d := &net.Dialer{Control: g.Control} // AllowCIDRs only; host names are not seen here
package netguard
