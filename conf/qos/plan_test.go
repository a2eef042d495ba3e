package qos

import (
	"net/netip"
	"reflect"
	"testing"
)

func intp(v int) *int { return &v }

func r(from, to string) Range {
	return Range{From: netip.MustParseAddr(from), To: netip.MustParseAddr(to)}
}

func TestDestinations(t *testing.T) {
	tests := []struct {
		name   string
		peers  []Peer
		v4, v6 []Range
	}{
		{name: "no peers matches everything", peers: nil, v4: nil, v6: nil},
		{
			name:  "whole v4 space is any v4, and no v6",
			peers: []Peer{{IPBlock: &IPBlock{CIDR: "0.0.0.0/0"}}},
			v4:    nil, v6: []Range{},
		},
		{
			name:  "cidr minus except",
			peers: []Peer{{IPBlock: &IPBlock{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8"}}}},
			v4:    []Range{r("0.0.0.0", "9.255.255.255"), r("11.0.0.0", "255.255.255.255")},
			v6:    []Range{},
		},
		{
			name: "touching blocks merge, except at the edges",
			peers: []Peer{
				{IPBlock: &IPBlock{CIDR: "10.0.1.0/24", Except: []string{"10.0.1.0/26"}}},
				{IPBlock: &IPBlock{CIDR: "10.0.0.0/24", Except: []string{"10.0.0.192/26"}}},
			},
			v4: []Range{r("10.0.0.0", "10.0.0.191"), r("10.0.1.64", "10.0.1.255")},
			v6: []Range{},
		},
		{
			name:  "host bits of a cidr are masked",
			peers: []Peer{{IPBlock: &IPBlock{CIDR: "192.168.7.9/24"}}},
			v4:    []Range{r("192.168.7.0", "192.168.7.255")}, v6: []Range{},
		},
		{
			name:  "except covering the cidr leaves nothing",
			peers: []Peer{{IPBlock: &IPBlock{CIDR: "10.1.0.0/16", Except: []string{"10.1.0.0/16"}}}},
			v4:    []Range{}, v6: []Range{},
		},
		{
			name:  "v6 with an except",
			peers: []Peer{{IPBlock: &IPBlock{CIDR: "fd00::/8", Except: []string{"fd00:10::/32"}}}},
			v4:    []Range{},
			v6: []Range{
				r("fd00::", "fd00:f:ffff:ffff:ffff:ffff:ffff:ffff"),
				r("fd00:11::", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
			},
		},
		{
			name:  "overlapping blocks union",
			peers: []Peer{{IPBlock: &IPBlock{CIDR: "10.0.0.0/8"}}, {IPBlock: &IPBlock{CIDR: "10.2.0.0/16"}}},
			v4:    []Range{r("10.0.0.0", "10.255.255.255")}, v6: []Range{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v4, v6 := Destinations(tc.peers)
			if !reflect.DeepEqual(v4, tc.v4) {
				t.Errorf("v4 = %v, want %v", v4, tc.v4)
			}
			if !reflect.DeepEqual(v6, tc.v6) {
				t.Errorf("v6 = %v, want %v", v6, tc.v6)
			}
		})
	}
}

func TestCompileOrdersByPriorityThenLaterRule(t *testing.T) {
	s := &Spec{
		DSCP: intp(46),
		Egress: []Rule{
			{Priority: 20, DSCP: intp(1)},
			{Priority: 40, DSCP: intp(2)},
			{Priority: 20, DSCP: intp(3)},
			{Priority: 21, Bandwidth: &Bandwidth{Rate: 8, Burst: 16}},
		},
	}
	p := Compile(s)
	var got []int
	for _, c := range p.Rules {
		got = append(got, c.Index)
	}
	if want := []int{1, 3, 2, 0}; !reflect.DeepEqual(got, want) {
		t.Fatalf("evaluation order = %v, want %v", got, want)
	}
	meter := p.Rules[1]
	if meter.Meter == nil || meter.Meter.RateBytes != 1000 || meter.Meter.BurstBytes != 2000 {
		t.Errorf("meter of 8 kbps / 16 kbit = %+v, want 1000 B/s, 2000 B", meter.Meter)
	}
	if meter.DSCP == nil || *meter.DSCP != 46 {
		t.Errorf("a rule without dscp keeps the attachment's dscp, got %v", meter.DSCP)
	}
}

func TestCompileShapersAndPorts(t *testing.T) {
	s := &Spec{
		IngressRate: 8000, IngressBurst: 800, EgressRate: 16000, EgressBurst: 1600,
		Egress: []Rule{{DSCP: intp(20), Classifier: Classifier{Ports: []Port{
			{Protocol: "tcp", Port: intp(80)}, {Protocol: "UDP"}, {Protocol: "SCTP", Port: intp(9)},
		}}}},
	}
	p := Compile(s)
	if *p.Ingress != (Shaper{RateBytes: 1000, BurstBytes: 100}) || *p.Egress != (Shaper{RateBytes: 2000, BurstBytes: 200}) {
		t.Errorf("shapers = %+v %+v", p.Ingress, p.Egress)
	}
	want := []PortMatch{{ProtoTCP, 80}, {ProtoUDP, 0}, {ProtoSCTP, 9}}
	if !reflect.DeepEqual(p.Rules[0].Ports, want) {
		t.Errorf("ports = %v, want %v", p.Rules[0].Ports, want)
	}
	if p.DSCP != nil {
		t.Errorf("no attachment dscp was set, got %d", *p.DSCP)
	}
}

func TestMerge(t *testing.T) {
	base := &Spec{IngressRate: 1, IngressBurst: 2, DSCP: intp(10), Egress: []Rule{{DSCP: intp(1)}}}
	over := &Spec{EgressRate: 5, EgressBurst: 6, DSCP: intp(0)}
	got := Merge(base, over)
	want := &Spec{IngressRate: 1, IngressBurst: 2, EgressRate: 5, EgressBurst: 6, DSCP: intp(0), Egress: []Rule{{DSCP: intp(1)}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Merge = %+v, want %+v", got, want)
	}
	*got.DSCP = 33
	if *base.DSCP != 10 {
		t.Fatal("Merge must not alias its inputs")
	}
	bw := WithBandwidth(nil, &RuntimeBandwidth{IngressRate: 100, IngressBurst: 10})
	if bw.IngressRate != 100 || bw.IngressBurst != 10 {
		t.Fatalf("WithBandwidth = %+v", bw)
	}
	if Merge(nil, nil) != nil {
		t.Fatal("Merge(nil, nil) must be nil")
	}
	replaced := Merge(base, &Spec{Egress: []Rule{}})
	if replaced.Egress == nil || len(replaced.Egress) != 0 {
		t.Fatalf("an explicit empty rule list replaces the base list, got %v", replaced.Egress)
	}
}
