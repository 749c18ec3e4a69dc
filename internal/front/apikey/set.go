package apikey

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
)

// Set is a set of API keys, looked up by the SHA-256 of the bearer token:
// a map lookup by hash takes the same time whatever prefix of a key a
// guess shares, unlike comparing the keys themselves. The zero value and
// nil hold no key. It is safe for concurrent use once built (Parse,
// Load).
type Set struct {
	byHash map[[sha256.Size]byte]*Key
}

// Len is the number of keys.
func (ks *Set) Len() int {
	if ks == nil {
		return 0
	}
	return len(ks.byHash)
}

// Lookup returns the key whose secret is token.
func (ks *Set) Lookup(token string) (*Key, bool) {
	if ks == nil || token == "" {
		return nil, false
	}
	k, ok := ks.byHash[sha256.Sum256([]byte(token))]
	return k, ok
}

// Tenants lists the tenants the keys name, sorted, each once.
func (ks *Set) Tenants() []string {
	if ks == nil {
		return nil
	}
	var out []string
	for _, k := range ks.byHash {
		out = append(out, k.Tenant)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Weight is the weight of tenant in fair shares, as its keys give it: 1
// for a tenant no key names.
func (ks *Set) Weight(tenant string) int {
	if ks != nil {
		for _, k := range ks.byHash {
			if k.Tenant == tenant {
				return k.Weight
			}
		}
	}
	return 1
}

// settleWeights gives every key its tenant's weight: the one its keys
// give (two different ones are an error naming both keys), else 1.
func (ks *Set) settleWeights() error {
	byTenant := map[string]*Key{} // tenant → a key that gives its weight
	keys := slices.SortedFunc(maps.Values(ks.byHash), func(a, b *Key) int { return a.seq - b.seq })
	for _, k := range keys {
		if !k.weightSet {
			continue
		}
		if first, ok := byTenant[k.Tenant]; ok && first.Weight != k.Weight {
			return fmt.Errorf("%s.weight: %d, but %s gives tenant %q weight %d; a tenant has one weight, give its keys the same",
				k.from, k.Weight, first.from, k.Tenant, first.Weight)
		}
		byTenant[k.Tenant] = k
	}
	for _, k := range keys {
		if first, ok := byTenant[k.Tenant]; ok {
			k.Weight = first.Weight
		}
	}
	return nil
}

// claimName checks that no key of ks has k's name (keys without a name
// share none).
func (ks *Set) claimName(k *Key) error {
	if k.Name == "" {
		return nil
	}
	for _, other := range ks.byHash {
		if other.Name == k.Name {
			return fmt.Errorf("%s.name: %q is the name of %s too; a key's name names one key", k.from, k.Name, other.from)
		}
	}
	return nil
}
