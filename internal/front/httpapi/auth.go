package httpapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/toolpool/toolpool/internal/front/apikey"
)

// errNoKey and errBadKey are the two ways a request fails authentication.
var (
	errNoKey  = errors.New("this API needs an API key: send Authorization: Bearer <key>")
	errBadKey = errors.New("the API key is not valid")
)

// authenticate returns the key of r's bearer token in ks.
func authenticate(ks *apikey.Set, r *http.Request) (*apikey.Key, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, errNoKey
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, errors.New("the Authorization header must be Bearer <key>")
	}
	k, ok := ks.Lookup(strings.TrimSpace(token))
	if !ok {
		return nil, errBadKey
	}
	return k, nil
}
