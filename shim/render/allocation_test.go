package render

import (
	"testing"

	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/qos"
)

func TestCeiling(t *testing.T) {
	dscp := 46
	for _, tc := range []struct {
		name      string
		spec      *qos.Spec
		allocated int64
		want      *qos.Spec
	}{
		{"no allocation, no qos", nil, 0, nil},
		{"no allocation keeps the qos", &qos.Spec{EgressRate: 5e6, EgressBurst: 5e4}, 0, &qos.Spec{EgressRate: 5e6, EgressBurst: 5e4}},
		{"allocation alone", nil, 30e6, &qos.Spec{EgressRate: 30e6, EgressBurst: 300_000}},
		{"tighter own rate wins, with its burst", &qos.Spec{EgressRate: 10e6, EgressBurst: 1e6}, 30e6, &qos.Spec{EgressRate: 10e6, EgressBurst: 1e6}},
		{"equal own rate stays", &qos.Spec{EgressRate: 30e6, EgressBurst: 1e6}, 30e6, &qos.Spec{EgressRate: 30e6, EgressBurst: 1e6}},
		{"tighter allocation wins, the smaller burst", &qos.Spec{EgressRate: 90e6, EgressBurst: 1e5}, 30e6, &qos.Spec{EgressRate: 30e6, EgressBurst: 1e5}},
		{"own burst larger than the allocation's", &qos.Spec{EgressRate: 90e6, EgressBurst: 9e6}, 30e6, &qos.Spec{EgressRate: 30e6, EgressBurst: 300_000}},
		{"ingress, dscp and queue untouched", &qos.Spec{IngressRate: 1e9, IngressBurst: 1e7, DSCP: &dscp, Queue: "cake"}, 30e6,
			&qos.Spec{IngressRate: 1e9, IngressBurst: 1e7, DSCP: &dscp, Queue: "cake", EgressRate: 30e6, EgressBurst: 300_000}},
		{"small allocation: at least two frames of burst", nil, 1e6, &qos.Spec{EgressRate: 1e6, EgressBurst: MinBurstBits}},
		{"tiny allocation: tbf's smallest rate, a burst it holds", nil, 3, &qos.Spec{EgressRate: 8, EgressBurst: 8 * MaxFillSeconds}},
		{"beyond any link: not shaped", nil, 2 * MaxShapedRate, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Ceiling(tc.spec, tc.allocated)
			if (got == nil) != (tc.want == nil) || got != nil && !equalSpec(*got, *tc.want) {
				t.Fatalf("Ceiling = %+v, want %+v", got, tc.want)
			}
			if err := got.Validate(field.Path("qos")); err != nil {
				t.Errorf("the ceiling does not validate: %v", err)
			}
		})
	}
}

func equalSpec(a, b qos.Spec) bool {
	sameDSCP := (a.DSCP == nil) == (b.DSCP == nil) && (a.DSCP == nil || *a.DSCP == *b.DSCP)
	return sameDSCP && a.IngressRate == b.IngressRate && a.IngressBurst == b.IngressBurst &&
		a.EgressRate == b.EgressRate && a.EgressBurst == b.EgressBurst && a.Queue == b.Queue && len(a.Egress) == len(b.Egress)
}

// TestCeilingDoesNotAlias: the network's and the claim's qos are not changed.
func TestCeilingDoesNotAlias(t *testing.T) {
	s := &qos.Spec{EgressRate: 90e6, EgressBurst: 1e5}
	Ceiling(s, 30e6)
	if s.EgressRate != 90e6 {
		t.Errorf("Ceiling changed its input: %+v", s)
	}
}

// TestAllocationBurstValidates: every allocation's ceiling is one tbf takes.
func TestAllocationBurstValidates(t *testing.T) {
	for _, rate := range []int64{8, 9, 100, 12_345, 1e6, 30e6, 1e9, 40e9, MaxShapedRate} {
		s := &qos.Spec{EgressRate: rate, EgressBurst: AllocationBurst(rate)}
		if err := s.Validate(""); err != nil {
			t.Errorf("rate %d: %v", rate, err)
		}
	}
}
