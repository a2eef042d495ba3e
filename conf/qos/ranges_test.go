package qos

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// subtractOne is the obvious cut, one range at a time: the oracle of without.
func subtractOne(rs []Range, cut Range) []Range {
	var out []Range
	for _, r := range rs {
		if cut.To.Less(r.From) || r.To.Less(cut.From) {
			out = append(out, r)
			continue
		}
		if r.From.Less(cut.From) {
			out = append(out, Range{From: r.From, To: cut.From.Prev()})
		}
		if cut.To.Less(r.To) {
			out = append(out, Range{From: cut.To.Next(), To: r.To})
		}
	}
	return out
}

// without gives what cutting the excepts one by one gives, for random
// blocks and except lists (overlapping, outside, covering, at the ends).
func TestWithoutCutsLikeOneByOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	prefix := func() Range {
		a := netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(256)), byte(rng.IntN(256))})
		return prefixRange(netip.PrefixFrom(a, 14+rng.IntN(19)).Masked())
	}
	for i := range 2000 {
		r := prefixRange(netip.MustParsePrefix([]string{"10.0.0.0/8", "10.0.0.0/14", "0.0.0.0/0"}[i%3]))
		var cuts []Range
		for range rng.IntN(12) {
			cuts = append(cuts, prefix())
		}
		want := []Range{r}
		for _, c := range cuts {
			want = subtractOne(want, c)
		}
		if got := without(r, slices.Clone(cuts)); !slices.Equal(normalize(slices.Clone(got)), normalize(want)) {
			t.Fatalf("%v without %v: got %v, want %v", r, cuts, got, want)
		}
	}
}
