package qos

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want []string // substrings, every one must appear; none means valid
	}{
		{name: "empty is valid", spec: Spec{}},
		{name: "full example is valid", spec: Spec{
			IngressRate: 50000000, IngressBurst: 500000, EgressRate: 10000000, EgressBurst: 200000, DSCP: intp(46),
			Egress: []Rule{{Priority: 10, DSCP: intp(20), Classifier: Classifier{
				To:    []Peer{{IPBlock: &IPBlock{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8"}}}},
				Ports: []Port{{Protocol: "TCP", Port: intp(80)}},
			}, Bandwidth: &Bandwidth{Rate: 1000, Burst: 1000}}},
		}},
		{name: "rate without burst", spec: Spec{EgressRate: 10}, want: []string{"qos.egressBurst: is required when egressRate is set"}},
		{name: "burst without rate", spec: Spec{IngressBurst: 10}, want: []string{"qos.ingressRate: is required when ingressBurst is set"}},
		{name: "negative", spec: Spec{IngressRate: -1}, want: []string{"qos.ingressRate: must not be negative"}},
		{name: "huge burst", spec: Spec{IngressRate: 1, IngressBurst: 1 << 40}, want: []string{"qos.ingressBurst: must be at most"}},
		{name: "dscp range", spec: Spec{DSCP: intp(64)}, want: []string{"qos.dscp: must be between 0 and 63, got 64"}},
		// tbf limits: a rate and a burst of at least a byte, a fill time of
		// 1 tick to 274 s, a queue limit that fits 32 bits.
		{name: "rate below a byte", spec: Spec{EgressRate: 7, EgressBurst: 800}, want: []string{"qos.egressRate: must be at least 8 bits/s"}},
		{name: "rate of one byte", spec: Spec{EgressRate: 8, EgressBurst: 800}},
		{name: "burst below a byte", spec: Spec{IngressRate: 8000, IngressBurst: 7}, want: []string{"qos.ingressBurst: must be at least 8 bits"}},
		{name: "fill time at the limit", spec: Spec{EgressRate: 8, EgressBurst: 8 * 274}},
		{name: "fill time past the limit", spec: Spec{EgressRate: 8, EgressBurst: 8 * 275}, want: []string{"qos.egressBurst: is 275 s of egressRate; tbf holds at most 274 s"}},
		{name: "bucket under a tick", spec: Spec{EgressRate: 1 << 40, EgressBurst: 8}, want: []string{"qos.egressBurst: is too small for egressRate"}},
		{name: "smallest bucket of a fast rate", spec: Spec{EgressRate: 1 << 40, EgressBurst: 8 * 8800}},
		{name: "queue limit overflow", spec: Spec{IngressRate: 1 << 40, IngressBurst: maxBurstBits}, want: []string{"qos.ingressRate: and ingressBurst overflow tbf's queue limit"}},
		{name: "every problem at once", spec: Spec{DSCP: intp(-1), Egress: []Rule{
			{Priority: -5, DSCP: intp(99)},
			{},
			{DSCP: intp(1), Bandwidth: &Bandwidth{Rate: 0, Burst: -1}},
			{DSCP: intp(1), Classifier: Classifier{
				To: []Peer{
					{}, {IPBlock: &IPBlock{CIDR: "nope"}},
					{IPBlock: &IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.1.0.0/24", "fd00::/64", "10.0.0.0/8", "x"}}},
				},
				Ports: []Port{{Protocol: "ICMP"}, {Protocol: "TCP", Port: intp(0)}, {Protocol: "udp", Port: intp(65536)}},
			}},
		}}, want: []string{
			"qos.dscp: must be between 0 and 63, got -1",
			"qos.egress[0].priority: must be between 0 and 65535, got -5",
			"qos.egress[0].dscp: must be between 0 and 63, got 99",
			"qos.egress[1]: sets neither dscp nor bandwidth",
			"qos.egress[2].bandwidth.rate: must be a positive number of kbps, got 0",
			"qos.egress[2].bandwidth.burst: must not be negative",
			"qos.egress[3].classifier.to[0]: must set ipBlock",
			`qos.egress[3].classifier.to[1].ipBlock.cidr: not a CIDR: "nope"`,
			"qos.egress[3].classifier.to[2].ipBlock.except[0]: 10.1.0.0/24 is not inside cidr 10.0.0.0/16",
			"qos.egress[3].classifier.to[2].ipBlock.except[1]: fd00::/64 is not of the same IP family",
			"qos.egress[3].classifier.to[2].ipBlock.except[2]: 10.0.0.0/8 is not inside cidr",
			`qos.egress[3].classifier.to[2].ipBlock.except[3]: not a CIDR: "x"`,
			`qos.egress[3].classifier.ports[0].protocol: must be TCP, UDP or SCTP, got "ICMP"`,
			"qos.egress[3].classifier.ports[1].port: must be between 1 and 65535, got 0",
			"qos.egress[3].classifier.ports[2].port: must be between 1 and 65535, got 65536",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Validate("qos")
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != len(tc.want) {
				t.Errorf("got %d problems, want %d:\n%v", n, len(tc.want), err)
			}
		})
	}
}
