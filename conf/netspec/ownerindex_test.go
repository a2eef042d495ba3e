package netspec

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The index answers as Owner does, for holders of every kind of segment
// overlapping in every way (VLAN masters named and left to the node,
// equal creation times, held or not), asked by listed and unlisted ones.
func TestOwnerIndexAnswersAsOwner(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	segment := func() Segment {
		switch r.IntN(5) {
		case 0:
			return Segment{}
		case 1:
			return Segment{Kind: SegmentVXLAN, ID: 1 + r.IntN(4)}
		case 2:
			return Segment{Kind: SegmentBridge, Device: []string{"br0", "br1"}[r.IntN(2)]}
		}
		return Segment{Kind: SegmentVLAN, ID: 1 + r.IntN(3), Device: []string{"", "eth1", "eth2"}[r.IntN(3)]}
	}
	holder := func(i int) Holder {
		return Holder{Kind: []string{"Network", "PodNetwork"}[r.IntN(2)], Namespace: []string{"", "t1", "t2"}[r.IntN(3)],
			Name: fmt.Sprintf("n%d", i), Created: time.Unix(int64(r.IntN(4)), 0), Segment: segment(), Held: r.IntN(2) == 0}
	}
	for round := range 200 {
		all := make([]Holder, r.IntN(40))
		for i := range all {
			all[i] = holder(i)
		}
		x := NewOwnerIndex(all)
		asks := append([]Holder{}, all...)
		for i := range 10 {
			asks = append(asks, holder(1000+i)) // not in the list
		}
		for _, h := range asks {
			want, got := Owner(h, all), x.Owner(h)
			if (want == nil) != (got == nil) || want != nil && !want.same(*got) {
				t.Fatalf("round %d: owner of %s (%s) is %v, want %v", round, h, h.Segment, got, want)
			}
		}
	}
}

// Ten thousand Networks of one tenant cost a node linear work, not
// quadratic, to decide.
func BenchmarkOwnerIndex10000(b *testing.B) {
	all := make([]Holder, 10000)
	for i := range all {
		all[i] = Holder{Kind: "Network", Namespace: "t1", Name: fmt.Sprint(i), Created: time.Unix(int64(i%7), 0),
			Segment: Segment{Kind: SegmentVLAN, ID: 1 + i%4094, Device: []string{"", "eth1"}[i%2]}}
	}
	for b.Loop() {
		x := NewOwnerIndex(all)
		for _, h := range all {
			x.Owner(h)
		}
	}
}
