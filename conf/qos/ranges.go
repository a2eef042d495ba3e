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

// subtract removes cut from every range of rs.
func subtract(rs []Range, cut Range) []Range {
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
