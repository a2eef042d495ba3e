package tc

import (
	"testing"

	"github.com/vishvananda/netlink"
)

// TestShareClasses: the root at the capacity first, a leaf per class under
// it, the best-effort class last with prio 7 and ceil at the capacity;
// rates below one frame per 10 ms are raised to it, a ceil below the rate
// to the rate.
func TestShareClasses(t *testing.T) {
	s := Share{CapacityBytes: 12_500_000, DefaultBytes: 0, Classes: []ShareClass{
		{Minor: 2, RateBytes: 3_750_000, CeilBytes: 3_750_000},
		{Minor: 3, RateBytes: 3_750_000, CeilBytes: 12_500_000},
		{Minor: 4, RateBytes: 10, CeilBytes: 0},
	}}
	got := s.shareClasses(7)
	want := []struct {
		handle, parent uint32
		rate, ceil     uint64
		prio           uint32
	}{
		{0x10001, 0x10000, 12_500_000, 12_500_000, 0},
		{0x10002, 0x10001, 3_750_000, 3_750_000, 0},
		{0x10003, 0x10001, 3_750_000, 12_500_000, 0},
		{0x10004, 0x10001, MinShareBytes, MinShareBytes, 0},
		{0x1ffff, 0x10001, MinShareBytes, 12_500_000, 7},
	}
	if len(got) != len(want) {
		t.Fatalf("%d classes, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Handle != w.handle || g.Parent != w.parent || g.Rate != w.rate || g.Ceil != w.ceil || g.Prio != w.prio || g.LinkIndex != 7 {
			t.Errorf("class %d: %s parent %s rate %d ceil %d prio %d, want %+v",
				i, netlink.HandleStr(g.Handle), netlink.HandleStr(g.Parent), g.Rate, g.Ceil, g.Prio, w)
		}
	}
	if q := shareQdisc(7); q.Defcls != ShareDefaultMinor || q.Handle != 0x10000 {
		t.Errorf("root qdisc %+v, want handle 1: default ffff", q)
	}
}
