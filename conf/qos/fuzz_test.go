package qos

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
)

// FuzzCompile checks that any spec that validates compiles without panicking
// into sorted, disjoint destination ranges and a precedence-ordered rule list.
func FuzzCompile(f *testing.F) {
	for _, seed := range []string{
		`{"dscp":46,"egress":[{"priority":10,"dscp":20,"classifier":{"to":[{"ipBlock":{"cidr":"0.0.0.0/0","except":["10.0.0.0/8"]}}],"ports":[{"protocol":"TCP","port":80}]},"bandwidth":{"rate":1000,"burst":1000}}]}`,
		`{"egress":[{"dscp":1,"classifier":{"to":[{"ipBlock":{"cidr":"fd00::/8","except":["fd00::/16","fdff::/16"]}},{"ipBlock":{"cidr":"::/0"}}]}}]}`,
		`{"ingressRate":1000,"ingressBurst":10,"egressRate":5,"egressBurst":5}`,
		`{"ingressRate":8,"ingressBurst":34359738360}`,
		`{"egressRate":1000000000000,"egressBurst":8}`,
		`{"egressRate":1099511627776,"egressBurst":34359738360}`,
		`{"egress":[{"priority":1,"dscp":1},{"priority":1,"dscp":2},{"priority":0,"bandwidth":{"rate":1}}]}`,
		`{"egressRate":20000000,"egressBurst":200000,"queue":"fq_codel"}`,
		`{"ingressRate":8000,"ingressBurst":800,"queue":"cake"}`,
		`{"egressRate":8000,"egressBurst":800,"queue":"tbf","dscp":10}`,
		`{"queue":"sfq"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Spec
		if json.Unmarshal(data, &s) != nil || s.Validate("qos") != nil {
			return
		}
		p := Compile(&s)
		if !slices.Contains(Queues, p.Queue) || p.ExplicitQueue != (s.Queue != "") {
			t.Fatalf("a valid spec compiles to queue %q (explicit %v), spec %q", p.Queue, p.ExplicitQueue, s.Queue)
		}
		for _, sh := range []*Shaper{p.Ingress, p.Egress} {
			if sh == nil {
				continue
			}
			ticks, limit := TBFBufferTicks(sh.RateBytes, sh.BurstBytes), TBFLimitBytes(sh.RateBytes, sh.BurstBytes)
			if sh.RateBytes == 0 || sh.BurstBytes == 0 || ticks < 1 || ticks > math.MaxUint32 || limit > math.MaxUint32 {
				t.Fatalf("a valid spec compiles to a tbf the kernel cannot take: %+v (buffer %.0f ticks, limit %.0f bytes)", sh, ticks, limit)
			}
		}
		for i, r := range p.Rules {
			if m := r.Meter; m != nil && (m.RateBytes == 0 || m.BurstBytes == 0 || m.BurstBytes > math.MaxUint32) {
				t.Fatalf("rule %d compiles to a meter the kernel cannot take: %+v", i, m)
			}
			if i > 0 {
				prev := p.Rules[i-1]
				if prev.Priority < r.Priority || prev.Priority == r.Priority && prev.Index < r.Index {
					t.Fatalf("rules out of precedence order: %+v before %+v", prev, r)
				}
			}
			for _, rs := range [][]Range{r.V4, r.V6} {
				for j, rg := range rs {
					if rg.To.Less(rg.From) {
						t.Fatalf("inverted range %v", rg)
					}
					if j > 0 && !rs[j-1].To.Less(rg.From) {
						t.Fatalf("ranges overlap or are unsorted: %v", rs)
					}
				}
			}
		}
	})
}
