package netpol

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/netclass-dev/netclass/conf/qos"
)

func TestPlanEqual(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.9")
	web := func() *Plan {
		return &Plan{Ingress: Direction{Isolated: true, Allow: []Allow{
			{V4: []qos.Range{{From: a, To: b}}, V6: []qos.Range{}, Ports: []PortRange{{Proto: 6, From: 80, To: 80}}},
			{},
		}}}
	}
	tests := []struct {
		name string
		p, q *Plan
		want bool
	}{
		{"the same", web(), web(), true},
		{"nil and zero", nil, &Plan{}, true},
		{"nil and nil", nil, nil, true},
		{"empty and nil allow lists", &Plan{Egress: Direction{Isolated: true, Allow: []Allow{}}}, &Plan{Egress: Direction{Isolated: true}}, true},
		{"isolation", &Plan{Egress: Direction{Isolated: true}}, &Plan{}, false},
		{"direction", &Plan{Egress: Direction{Isolated: true}}, &Plan{Ingress: Direction{Isolated: true}}, false},
		{"every address against none", web(), edit(web(), func(p *Plan) { p.Ingress.Allow[0].V6 = nil }), false},
		{"a range's end", web(), edit(web(), func(p *Plan) { p.Ingress.Allow[0].V4[0].To = a }), false},
		{"a port", web(), edit(web(), func(p *Plan) { p.Ingress.Allow[0].Ports[0].To = 81 }), false},
		{"a protocol", web(), edit(web(), func(p *Plan) { p.Ingress.Allow[0].Ports[0].Proto = 17 }), false},
		{"an allow more", web(), edit(web(), func(p *Plan) { p.Ingress.Allow = append(p.Ingress.Allow, Allow{}) }), false},
		{"allows in another order", web(), edit(web(), func(p *Plan) { x := p.Ingress.Allow; x[0], x[1] = x[1], x[0] }), false},
		{"a range more", web(), edit(web(), func(p *Plan) { x := &p.Ingress.Allow[0]; x.V4 = append(x.V4, x.V4[0]) }), false},
		{"an Admin verdict", web(), edit(web(), func(p *Plan) { p.Ingress.Admin = []Verdict{{Action: Deny}} }), false},
		{"a Baseline verdict", web(), edit(web(), func(p *Plan) { p.Egress.Baseline = []Verdict{{Action: Deny}} }), false},
		{"a verdict's action", edit(web(), func(p *Plan) { p.Ingress.Admin = []Verdict{{Action: Deny}} }),
			edit(web(), func(p *Plan) { p.Ingress.Admin = []Verdict{{Action: Pass}} }), false},
		{"a verdict's match", edit(web(), func(p *Plan) { p.Ingress.Admin = []Verdict{{Action: Deny}} }),
			edit(web(), func(p *Plan) { p.Ingress.Admin = []Verdict{{Action: Deny, Match: Allow{V4: []qos.Range{}}}} }), false},
		{"the same verdicts", edit(web(), func(p *Plan) { p.Ingress.Baseline = []Verdict{{Action: Pass}} }),
			edit(web(), func(p *Plan) { p.Ingress.Baseline = []Verdict{{Action: Pass}} }), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Equal(tc.q); got != tc.want {
				t.Errorf("%+v.Equal(%+v) = %v, want %v", tc.p, tc.q, got, tc.want)
			}
			if got := tc.q.Equal(tc.p); got != tc.want {
				t.Errorf("not symmetric: %+v.Equal(%+v) = %v", tc.q, tc.p, got)
			}
		})
	}
}

func edit(p *Plan, f func(*Plan)) *Plan { f(p); return p }

// Equal compares every field: one added to a plan's types must be added
// to Equal (and to this list), or the agent would take a changed plan for
// the one an attachment holds.
func TestPlanEqualKnowsEveryField(t *testing.T) {
	for _, tc := range []struct {
		typ  reflect.Type
		want []string
	}{
		{reflect.TypeFor[Plan](), []string{"Ingress", "Egress"}},
		{reflect.TypeFor[Direction](), []string{"Isolated", "Allow", "Admin", "Baseline"}},
		{reflect.TypeFor[Verdict](), []string{"Action", "Match"}},
		{reflect.TypeFor[Allow](), []string{"V4", "V6", "Ports"}},
		{reflect.TypeFor[PortRange](), []string{"Proto", "From", "To"}}, // compared by ==
	} {
		var got []string
		for f := range tc.typ.Fields() {
			got = append(got, f.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s has fields %v; Equal compares %v", tc.typ, got, tc.want)
		}
	}
}
