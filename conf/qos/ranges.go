package qos

import (
	"net/netip"
	"sort"
)

// prefixRange returns the first and last address of a masked prefix.
func prefixRange(p netip.Prefix) Range {
	from := p.Addr()
	b := from.AsSlice()
	hostBits := len(b)*8 - p.Bits()
	for i := len(b) - 1; i >= 0 && hostBits > 0; i-- {
		n := min(hostBits, 8)
		b[i] |= byte(1<<n - 1)
		hostBits -= n
	}
	to, _ := netip.AddrFromSlice(b)
	return Range{From: from, To: to}
}

// without returns r minus the union of cuts, in one pass over the cuts
// sorted and merged: an ipBlock's except list costs n log n, not n².
func without(r Range, cuts []Range) []Range {
	out := []Range{}
	from := r.From
	for _, c := range normalize(cuts) {
		if c.To.Less(from) || r.To.Less(c.From) {
			continue // outside what is left
		}
		if from.Less(c.From) {
			out = append(out, Range{From: from, To: c.From.Prev()})
		}
		next := c.To.Next()
		if !next.IsValid() || r.To.Less(next) {
			return out // the cut reaches r's end
		}
		from = next
	}
	return append(out, Range{From: from, To: r.To})
}

// normalize sorts ranges and merges the ones that overlap or touch.
func normalize(rs []Range) []Range {
	if len(rs) == 0 {
		return rs
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].From.Less(rs[j].From) })
	out := []Range{rs[0]}
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		next := last.To.Next()
		if !next.IsValid() || !next.Less(r.From) { // overlaps or touches
			if last.To.Less(r.To) {
				last.To = r.To
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

func isWhole(rs []Range, v4 bool) bool {
	if len(rs) != 1 {
		return false
	}
	whole := netip.MustParsePrefix("::/0")
	if v4 {
		whole = netip.MustParsePrefix("0.0.0.0/0")
	}
	return rs[0] == prefixRange(whole)
}
