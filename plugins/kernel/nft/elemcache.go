package nft

import (
	"hash/maphash"
	"net/netip"
	"slices"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/qos"
)

// elementCache renders each distinct list of address ranges once for the
// ports of one sync. Their plans hold the same peers' ranges many times
// over (a policy selecting 100 pods gives each of them a copy of each of
// its peers' ranges, and the plans the ports held before hold them again),
// and rendering them is most of a port's rendering's time and allocations.
// The rendered elements are shared by every set that holds them, read-only
// (google/nftables only reads them); two sets holding the same slice are
// known equal without comparing their elements (sameInOrder). It lives as
// long as the sync: memory is bounded by what the sync renders anyway.
type elementCache struct {
	seed    maphash.Seed
	byHash  map[uint64][]rendered
	scratch [17]byte
}

// rendered is one list of ranges and its elements.
type rendered struct {
	ranges []qos.Range
	els    []nftables.SetElement
}

func newElementCache() *elementCache {
	return &elementCache{seed: maphash.MakeSeed(), byHash: map[uint64][]rendered{}}
}

// intervals returns intervalElements(ranges), rendered once per distinct
// ranges (a nil cache renders every time).
func (c *elementCache) intervals(ranges []qos.Range) []nftables.SetElement {
	if c == nil {
		return intervalElements(ranges)
	}
	h := c.hash(ranges)
	for _, r := range c.byHash[h] {
		if slices.Equal(r.ranges, ranges) {
			return r.els
		}
	}
	els := intervalElements(ranges)
	c.byHash[h] = append(c.byHash[h], rendered{ranges: ranges, els: els})
	return els
}

func (c *elementCache) hash(ranges []qos.Range) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	for _, r := range ranges {
		for _, a := range [2]netip.Addr{r.From, r.To} {
			b := a.As16()
			c.scratch[0] = 0
			if a.Is4() {
				c.scratch[0] = 4
			}
			copy(c.scratch[1:], b[:])
			_, _ = h.Write(c.scratch[:])
		}
	}
	return h.Sum64()
}
