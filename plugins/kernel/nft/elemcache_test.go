package nft

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/netclass-dev/netclass/conf/qos"
)

func TestElementCache(t *testing.T) {
	r := func(from, to string) qos.Range {
		return qos.Range{From: netip.MustParseAddr(from), To: netip.MustParseAddr(to)}
	}
	a := []qos.Range{r("10.0.0.1", "10.0.0.1"), r("10.0.1.0", "10.0.1.255")}
	aCopy := slices.Clone(a)
	b := []qos.Range{r("10.0.0.1", "10.0.0.1"), r("10.0.1.0", "10.0.1.254")}
	v6 := []qos.Range{r("::a00:1", "::a00:1"), r("::a00:100", "::a00:1ff")} // the same bytes' tail as a, another family
	c := newElementCache()
	first := c.intervals(a)
	for _, tc := range []struct {
		name   string
		ranges []qos.Range
		shared bool
	}{
		{"the same slice", a, true},
		{"an equal copy", aCopy, true},
		{"one range differs", b, false},
		{"another family", v6, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.intervals(tc.ranges)
			if want := intervalElements(tc.ranges); !sameInOrder(got, want) {
				t.Fatalf("elements %v, want %v", got, want)
			}
			if shared := &got[0] == &first[0]; shared != tc.shared {
				t.Errorf("shares the first rendering: %v, want %v", shared, tc.shared)
			}
		})
	}
	var none *elementCache
	if x, y := none.intervals(a), none.intervals(a); &x[0] == &y[0] || !sameInOrder(x, y) {
		t.Error("a nil cache must render each time, alike")
	}
}
