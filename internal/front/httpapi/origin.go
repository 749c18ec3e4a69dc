package httpapi

import "net/http"

// SameOrigin reports whether a browser sent r from a page of the server
// itself: its Origin header is the server as the request names it (the
// Host), or, without an Origin, Sec-Fetch-Site says same-origin. A request
// with neither is not a browser's same-origin request. The operators'
// console requires it of every state-changing request, on top of the
// gate's Host check.
func SameOrigin(r *http.Request) bool {
	if raw := r.Header.Get("Origin"); raw != "" {
		n, err := normalOrigin(raw)
		return err == nil && sameOrigin(n, r.Host)
	}
	return r.Header.Get("Sec-Fetch-Site") == "same-origin"
}
