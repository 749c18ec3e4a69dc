package netguard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
)

// Defaults of a Guard and its HTTP client.
const (
	// DialTimeoutDefault bounds one connection attempt.
	DialTimeoutDefault = 10 * time.Second
	// MaxRedirects is how many redirects the client of Client follows.
	MaxRedirects = 5
)

// Resolver looks up the addresses of a host name. *net.Resolver satisfies
// it; tests inject their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard refuses connections to addresses outside the public internet (see
// Restricted) unless an allow-list lets them through. Its zero value refuses
// every restricted address and resolves names with net.DefaultResolver.
//
// Do not change a Guard's fields while it is in use.
type Guard struct {
	// AllowCIDRs lets these networks through although they are restricted,
	// whatever host name led to them.
	AllowCIDRs []netip.Prefix
	// AllowHosts lets these hosts through, whatever they resolve to. An
	// entry is a host name ("search.internal"), a name with a leading "*."
	// for its subdomains ("*.corp.example"), or an IP literal, each with an
	// optional port ("search.internal:8888", "127.0.0.1:8080",
	// "[::1]:8080") that restricts the entry to that port. Matching is on the
	// host as asked for, before resolution, and ignores case and a final
	// dot. Only DialContext (and so Transport and Client) honours
	// AllowHosts; Control sees addresses only.
	AllowHosts []string
	// Resolver looks up host names. Default net.DefaultResolver.
	Resolver Resolver
	// DialTimeout bounds each connection attempt. Default DialTimeoutDefault.
	DialTimeout time.Duration

	// dial dials an address the guard has checked, with d (whose Control
	// checks it again). Nil means d.DialContext; tests record dials here.
	dial func(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error)
}

// BlockedError is a connection the guard refused. Errors the guard returns
// wrap it in classify.Permanent and classify.WithMessage, so a tool can
// return them as they are: the model reads "the address of <host> is not
// allowed (private/loopback network)" and the call is not retried.
type BlockedError struct {
	Host  string     // the host as asked for: a name or an IP literal
	Addr  netip.Addr // the refused address
	Range string     // why, e.g. RangeLoopback; for logs
}

// Error names the host, the address and its range, for logs.
func (e *BlockedError) Error() string {
	s := "netguard: connection to " + e.Host
	if e.Addr.IsValid() && e.Addr.String() != e.Host {
		s += " (" + e.Addr.String() + ")"
	}
	return s + " refused: " + e.Range + " address"
}

// ModelMessage is the cause the model reads for a refused connection.
func (e *BlockedError) ModelMessage() string {
	return "the address of " + modelHost(e.Host) + " is not allowed (private/loopback network); " +
		"the tool can only reach public internet addresses"
}

// modelHost renders a host for the model, cut to a sane length.
func modelHost(h string) string {
	const maxLen = 100
	if h == "" {
		return "the server"
	}
	if len(h) > maxLen {
		h = h[:maxLen] + "…"
	}
	return h
}

// blocked returns the error the guard gives for a refused address.
func blocked(host string, addr netip.Addr, rangeName string) error {
	be := &BlockedError{Host: host, Addr: addr, Range: rangeName}
	return classify.Permanent(classify.WithMessage(be, be.ModelMessage()))
}

// Check returns nil when the guard lets addr through (it is not restricted,
// or AllowCIDRs contains it), else an error wrapping a *BlockedError.
func (g *Guard) Check(addr netip.Addr) error {
	return g.check(addr.String(), addr)
}

func (g *Guard) check(host string, addr netip.Addr) error {
	name, bad := Restricted(addr)
	if !bad {
		return nil
	}
	plain := addr.WithZone("")
	for _, p := range g.AllowCIDRs {
		if p.Contains(plain) || p.Contains(plain.Unmap()) {
			return nil
		}
	}
	return blocked(host, addr, name)
}

// Control checks the address a socket is about to connect to; use it as
// net.Dialer.Control. It runs after name resolution and before the
// connection attempt, so no packet reaches a refused address. It honours
// AllowCIDRs, not AllowHosts (it sees no host names). An address that does
// not parse is refused.
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return blocked(address, netip.Addr{}, RangeInvalid)
	}
	return g.check(ap.Addr().String(), ap.Addr())
}

// DialContext dials address ("host:port") for network "tcp", "tcp4",
// "tcp6", "udp", "udp4" or "udp6", checking every address first: it
// resolves a host name itself with Resolver, drops the restricted
// addresses (unless the host is in AllowHosts or an address in AllowCIDRs)
// and dials the others one by one as IP literals, with Control checking
// each socket again. A host whose addresses are all refused gives an error
// wrapping *BlockedError without any connection attempt.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return nil, fmt.Errorf("netguard: network %q is not supported", network)
	}
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("netguard: %w", err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("netguard: port %q is not a number", portStr)
	}
	allowedHost := g.hostAllowed(host, portStr)
	addrs, err := g.resolve(ctx, network, host)
	if err != nil {
		return nil, err
	}
	var ok []netip.Addr
	var refused error
	for _, a := range addrs {
		if !allowedHost {
			if err := g.check(host, a); err != nil {
				refused = cmp.Or(refused, err)
				continue
			}
		}
		ok = append(ok, a)
	}
	if len(ok) == 0 {
		if refused != nil {
			return nil, refused
		}
		return nil, &net.DNSError{Err: "no addresses found", Name: host, IsNotFound: true}
	}
	d := &net.Dialer{Timeout: cmp.Or(g.DialTimeout, DialTimeoutDefault), KeepAlive: 30 * time.Second}
	d.Control = g.Control
	if allowedHost {
		d.Control = onlyThese(host, ok)
	}
	dial := g.dial
	if dial == nil {
		dial = func(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
			return d.DialContext(ctx, network, address)
		}
	}
	var first error
	for _, a := range ok {
		conn, err := dial(ctx, d, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		first = cmp.Or(first, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// onlyThese is the Control of a dial to an allow-listed host: it lets
// through exactly the addresses the host resolved to.
func onlyThese(host string, addrs []netip.Addr) func(string, string, syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return blocked(host, netip.Addr{}, RangeInvalid)
		}
		got := ap.Addr().Unmap()
		for _, a := range addrs {
			if a.Unmap() == got {
				return nil
			}
		}
		name, _ := Restricted(got)
		return blocked(host, got, cmp.Or(name, "unexpected"))
	}
}

// resolve returns the addresses of host: itself for an IP literal, else
// what Resolver finds, unmapped (a resolver may return IPv4 addresses in
// their IPv4-mapped IPv6 form).
func (g *Guard) resolve(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	r := g.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	ipNet := "ip"
	switch network {
	case "tcp4", "udp4":
		ipNet = "ip4"
	case "tcp6", "udp6":
		ipNet = "ip6"
	}
	addrs, err := r.LookupNetIP(ctx, ipNet, host)
	if err != nil {
		return nil, err
	}
	for i, a := range addrs {
		if a.Is4In6() {
			addrs[i] = a.Unmap()
		}
	}
	return addrs, nil
}

// hostAllowed reports whether AllowHosts lists host (with port, or any
// port).
func (g *Guard) hostAllowed(host, port string) bool {
	if len(g.AllowHosts) == 0 {
		return false
	}
	host = normHost(host)
	hostIP, ipErr := netip.ParseAddr(host)
	hostIsIP := ipErr == nil
	for _, e := range g.AllowHosts {
		eh, ep := splitEntry(e)
		if eh == "" || ep != "" && ep != port {
			continue
		}
		if hostIsIP {
			if ip, err := netip.ParseAddr(eh); err == nil && ip.WithZone("").Unmap() == hostIP.WithZone("").Unmap() {
				return true
			}
			continue
		}
		if suffix, ok := strings.CutPrefix(eh, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
			continue
		}
		if eh == host {
			return true
		}
	}
	return false
}

// splitEntry splits an AllowHosts entry into its normalised host and its
// port ("" for any).
func splitEntry(e string) (host, port string) {
	e = strings.TrimSpace(e)
	if h, p, err := net.SplitHostPort(e); err == nil {
		return normHost(h), p
	}
	return normHost(strings.TrimSuffix(strings.TrimPrefix(e, "["), "]")), ""
}

func normHost(h string) string {
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// ErrTooManyRedirects is what CheckRedirect returns (wrapped) after
// MaxRedirects redirects.
var ErrTooManyRedirects = errors.New("netguard: too many redirects")

// ErrRedirectScheme is what CheckRedirect returns (wrapped) for a redirect
// to a scheme other than http and https.
var ErrRedirectScheme = errors.New("netguard: redirect to a scheme other than http or https")

// CheckRedirect is an http.Client redirect policy: at most MaxRedirects
// redirects, to http and https URLs only. Each redirect's connection goes
// through DialContext, which checks its address. Its errors are permanent,
// with a message for the model.
func (g *Guard) CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return classify.Permanent(classify.WithMessage(
			fmt.Errorf("%w: stopped after %d", ErrTooManyRedirects, MaxRedirects),
			"the server redirected the request more than "+strconv.Itoa(MaxRedirects)+" times"))
	}
	if s := req.URL.Scheme; s != "http" && s != "https" {
		return classify.Permanent(classify.WithMessage(
			fmt.Errorf("%w: %q", ErrRedirectScheme, s),
			"the server redirected the request to a URL that is not http or https"))
	}
	return nil
}

// Transport returns an HTTP transport that dials through the guard. It
// uses no proxy (a proxy would connect on our behalf, past the guard).
func (g *Guard) Transport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           g.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Client returns an HTTP client with Transport and CheckRedirect. timeout
// bounds each request, redirects and body included; 0 means none (bound
// requests with their context instead).
func (g *Guard) Client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: g.Transport(), CheckRedirect: g.CheckRedirect, Timeout: timeout}
}
