package nft

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables/expr"
)

// rulesOf renders "abc" as three one-expression rules a, b, c.
func rulesOf(s string) [][]expr.Any {
	out := make([][]expr.Any, len(s))
	for i := range len(s) {
		out[i] = []expr.Any{&expr.Immediate{Register: 1, Data: []byte{s[i]}}}
	}
	return out
}

func nameOf(r []expr.Any) byte { return r[0].(*expr.Immediate).Data[0] }

// heldOf is what the kernel holds for "abc": handles 10, 20, 30.
func heldOf(s string) []heldRule {
	out := make([]heldRule, len(s))
	for i, r := range rulesOf(s) {
		out[i] = heldRule{handle: uint64(10 * (i + 1)), exprs: r}
	}
	return out
}

// kernelApply does what the kernel does with the edit's messages, in the
// order queueEdit sends them, and returns the chain's rules with the
// handles of those that were neither replaced nor added ("a10b*c30").
func kernelApply(t *testing.T, got []heldRule, e ruleEdit) string {
	t.Helper()
	chain := slices.Clone(got)
	at := func(h uint64) int {
		i := slices.IndexFunc(chain, func(r heldRule) bool { return r.handle == h })
		if i < 0 {
			t.Fatalf("edit %+v names handle %d, not in the chain", e, h)
		}
		return i
	}
	for _, h := range e.del {
		chain = slices.Delete(chain, at(h), at(h)+1)
	}
	for _, r := range e.insert {
		if e.before == 0 {
			chain = append(chain, heldRule{exprs: r})
			continue
		}
		chain = slices.Insert(chain, at(e.before), heldRule{exprs: r})
	}
	var b strings.Builder
	for _, r := range chain {
		b.WriteByte(nameOf(r.exprs))
		if r.handle == 0 {
			b.WriteByte('*')
		} else {
			fmt.Fprint(&b, r.handle)
		}
	}
	return b.String()
}

func TestPlanEdit(t *testing.T) {
	tests := []struct {
		from, to string
		want     string // the chain after the edit: handle, or * for a rule sent
		messages int
	}{
		{from: "abc", to: "abc", want: "a10b20c30", messages: 0},
		{from: "abc", to: "axc", want: "a10x*c30", messages: 2},     // one rule edited: deleted, its new one inserted
		{from: "abc", to: "abxc", want: "a10b20x*c30", messages: 1}, // inserted before c
		{from: "abc", to: "ac", want: "a10c30", messages: 1},
		{from: "abc", to: "abcd", want: "a10b20c30d*", messages: 1}, // appended
		{from: "abc", to: "xabc", want: "x*a10b20c30", messages: 1}, // before the first
		{from: "abc", to: "bc", want: "b20c30", messages: 1},
		{from: "abc", to: "xyz", want: "x*y*z*", messages: 6},
		{from: "", to: "ab", want: "a*b*", messages: 2},
		{from: "ab", to: "", want: "", messages: 2},
		{from: "aab", to: "ab", want: "a10b30", messages: 1}, // equal rules: a suffix never overlaps the prefix
		{from: "ab", to: "aab", want: "a10a*b20", messages: 1},
		{from: "axyb", to: "ayxb", want: "a10y*x*b40", messages: 4},
		{from: "abcde", to: "axcye", want: "a10x*c*y*e50", messages: 6},
		{from: "abc", to: "abd", want: "a10b20d*", messages: 2}, // the last: appended
	}
	for _, tc := range tests {
		t.Run(tc.from+"->"+tc.to, func(t *testing.T) {
			e := planEdit(heldOf(tc.from), rulesOf(tc.to))
			if got := kernelApply(t, heldOf(tc.from), e); got != tc.want {
				t.Errorf("chain after the edit %q, want %q", got, tc.want)
			}
			if n := len(e.del) + len(e.insert); n != tc.messages {
				t.Errorf("%d rule messages, want %d", n, tc.messages)
			}
		})
	}
}

// Every edit between any two short chains, duplicates included, leaves
// exactly the rendered rules, in order, with no more rule messages than
// the two chains have rules.
func TestPlanEditIsComplete(t *testing.T) {
	var chains []string
	var gen func(prefix string)
	gen = func(prefix string) {
		chains = append(chains, prefix)
		if len(prefix) == 4 {
			return
		}
		for _, c := range "abc" {
			gen(prefix + string(c))
		}
	}
	gen("")
	for _, from := range chains {
		for _, to := range chains {
			e := planEdit(heldOf(from), rulesOf(to))
			got := kernelApply(t, heldOf(from), e)
			var names strings.Builder
			for _, c := range got {
				if c >= 'a' && c <= 'z' {
					names.WriteRune(c)
				}
			}
			if names.String() != to {
				t.Fatalf("%q -> %q: the chain holds %q (%s)", from, to, names.String(), got)
			}
			if n := len(e.del) + len(e.insert); n > len(from)+len(to) {
				t.Errorf("%q -> %q: %d rule messages", from, to, n)
			}
		}
	}
}

// A rule read back (set IDs zero) equals its rendering; any other field
// of an expression makes two rules differ.
func TestSameRule(t *testing.T) {
	lookup := func(id uint32, name string) []expr.Any {
		return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Lookup{SourceRegister: 1, SetName: name, SetID: id}}
	}
	tests := []struct {
		name      string
		got, want []expr.Any
		same      bool
	}{
		{"read back", lookup(0, "s"), lookup(7, "s"), true},
		{"renumbered", lookup(3, "s"), lookup(7, "s"), true},
		{"another set", lookup(7, "s"), lookup(7, "t"), false},
		{"another register", []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 2}}, []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}}, false},
		{"a lookup against another expression", lookup(0, "s")[1:], []expr.Any{&expr.Counter{}}, false},
		{"shorter", lookup(0, "s")[:1], lookup(0, "s"), false},
	}
	for _, tc := range tests {
		if got := sameRule(tc.got, tc.want); got != tc.same {
			t.Errorf("%s: sameRule = %v, want %v", tc.name, got, tc.same)
		}
	}
}
