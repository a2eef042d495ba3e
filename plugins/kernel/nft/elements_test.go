package nft

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/qos"
)

// show renders elements as nft lists them: "addr" for a start, "<addr" for
// an interval's end.
func show(els []nftables.SetElement) string {
	var out []string
	for _, e := range els {
		a, ok := netip.AddrFromSlice(e.Key)
		s := a.String()
		if !ok {
			s = fmt.Sprintf("%x", e.Key)
		}
		if e.IntervalEnd {
			s = "<" + s
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func rng(from, to string) qos.Range {
	return qos.Range{From: netip.MustParseAddr(from), To: netip.MustParseAddr(to)}
}

func TestIntervalElements(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ranges []qos.Range
		want   string
	}{
		{"none", nil, ""},
		{"one address", []qos.Range{rng("10.0.0.5", "10.0.0.5")}, "<0.0.0.0 10.0.0.5 <10.0.0.6"},
		{"from zero", []qos.Range{rng("0.0.0.0", "9.255.255.255")}, "0.0.0.0 <10.0.0.0"},
		{"to the last address", []qos.Range{rng("10.0.0.0", "10.0.0.255"), rng("192.168.0.0", "255.255.255.255")},
			"<0.0.0.0 10.0.0.0 <10.0.1.0 192.168.0.0"},
		{"ipv6", []qos.Range{rng("fd00::", "fd00::ffff"), rng("fe80::1", "fe80::1")},
			"<:: fd00:: <fd00::1:0 fe80::1 <fe80::2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			els := intervalElements(tc.ranges)
			if got := show(els); got != tc.want {
				t.Errorf("elements %q, want %q", got, tc.want)
			}
			for i, e := range els { // each key its own bytes: appending to one must not change another
				if len(e.Key) != cap(e.Key) {
					t.Errorf("element %d: key of len %d, cap %d", i, len(e.Key), cap(e.Key))
				}
			}
		})
	}
}

func TestElementDiff(t *testing.T) {
	start := func(a string) nftables.SetElement { return nftables.SetElement{Key: netip.MustParseAddr(a).AsSlice()} }
	end := func(a string) nftables.SetElement {
		return nftables.SetElement{Key: netip.MustParseAddr(a).AsSlice(), IntervalEnd: true}
	}
	long := func(b byte, n int) nftables.SetElement { return nftables.SetElement{Key: bytes.Repeat([]byte{b}, n)} }
	for _, tc := range []struct {
		name             string
		got, want        []nftables.SetElement
		wantAdd, wantDel string
	}{
		{"same", []nftables.SetElement{end("0.0.0.0"), start("10.0.0.1")}, []nftables.SetElement{start("10.0.0.1"), end("0.0.0.0")}, "", ""},
		{"the interval flag counts", []nftables.SetElement{start("10.0.0.2")}, []nftables.SetElement{end("10.0.0.2")}, "<10.0.0.2", "10.0.0.2"},
		{"deletes ascending", []nftables.SetElement{start("10.0.0.9"), end("10.0.0.3"), start("10.0.0.1")}, nil, "",
			"10.0.0.1 <10.0.0.3 10.0.0.9"},
		{"ipv6 and ipv4 keys differ", []nftables.SetElement{start("::ffff:10.0.0.1")}, []nftables.SetElement{start("10.0.0.1")},
			"10.0.0.1", "::ffff:10.0.0.1"},
		{"long keys", []nftables.SetElement{long(1, 40), long(2, 40)}, []nftables.SetElement{long(2, 40), long(3, 40)},
			strings.Repeat("03", 40), strings.Repeat("01", 40)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			add, del := elementDiff(tc.got, tc.want)
			if show(add) != tc.wantAdd || show(del) != tc.wantDel {
				t.Errorf("add %q, del %q; want add %q, del %q", show(add), show(del), tc.wantAdd, tc.wantDel)
			}
		})
	}
}

func TestElementDiffIsSymmetricOnRenderings(t *testing.T) {
	a := intervalElements([]qos.Range{rng("10.0.0.0", "10.0.0.9"), rng("10.0.1.0", "10.0.1.0")})
	b := intervalElements([]qos.Range{rng("10.0.0.0", "10.0.0.9"), rng("10.0.2.0", "10.0.2.0")})
	add, del := elementDiff(a, b)
	if show(add) != "10.0.2.0 <10.0.2.1" || show(del) != "10.0.1.0 <10.0.1.1" {
		t.Errorf("add %q, del %q", show(add), show(del))
	}
	if add2, del2 := elementDiff(b, a); show(add2) != show(del) || show(del2) != show(add) {
		t.Errorf("b to a: add %q, del %q", show(add2), show(del2))
	}
}
