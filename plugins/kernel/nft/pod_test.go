package nft

import (
	"strings"
	"testing"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/test/nstest"
)

// podNS is a namespace with an interface net1 for the egress hook to bind to.
func podNS(t *testing.T) *nstest.NS {
	t.Helper()
	n := nstest.New(t)
	if out, err := execIn(n, "ip", "link", "add", "net1", "type", "veth", "peer", "name", "peer1"); err != nil {
		t.Fatalf("create net1: %v\n%s", err, out)
	}
	return n
}

func TestPodTableMatchesNftSyntax(t *testing.T) {
	n := podNS(t)
	c := conn(t, n)
	if err := ApplyPodQoS(c, "net1", samplePlan()); err != nil {
		t.Fatal(err)
	}
	got := nftList(t, n, "table", "netdev", "netclass_net1")
	// What nft itself prints for the rules we mean: proof that the
	// hand-built expressions are the statements they claim to be (nft
	// leaves out the `meta protocol` a payload match implies).
	for _, want := range []string{
		`type filter hook egress device "net1" priority filter; policy accept;`,
		"elements = { 0.0.0.0-9.255.255.255, 11.0.0.0-255.255.255.255 }",
		"elements = { fd00::/8 }",
		"icmpv6 type 133-137 accept",
		"ip daddr @r0_v4 tcp dport 80 goto r0",
		"ip6 daddr @r1_v6 meta l4proto udp goto r1",
		"ip dscp set ef\n\t\tip6 dscp set ef\n\t}",
		"ip dscp set af22\n\t\tip6 dscp set af22\n\t\tlimit rate over 125000 bytes/second drop\n\t\taccept",
		"ip dscp set cs1\n\t\tip6 dscp set cs1\n\t\taccept",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("nft list lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "icmpv6 type") > strings.Index(got, "goto r0") || strings.Index(got, "goto r0") > strings.Index(got, "goto r1") {
		t.Errorf("NDP first, then the priority 10 rule before the priority 5 rule:\n%s", got)
	}
	if err := CheckPodQoS(c, "net1", samplePlan()); err != nil {
		t.Fatalf("CheckPodQoS right after ApplyPodQoS: %v", err)
	}
}

func TestCheckPodQoSNoticesChanges(t *testing.T) {
	tests := []struct {
		name   string
		tamper []string // nft command run in the namespace
	}{
		{"rule deleted", []string{"flush", "chain", "netdev", "netclass_net1", "r0"}},
		{"table deleted", []string{"delete", "table", "netdev", "netclass_net1"}},
		{"set element removed", []string{"delete", "element", "netdev", "netclass_net1", "r0_v4", "{", "11.0.0.0-255.255.255.255", "}"}},
		{"rule added", []string{"add", "rule", "netdev", "netclass_net1", "egress", "accept"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := podNS(t)
			c := conn(t, n)
			if err := ApplyPodQoS(c, "net1", samplePlan()); err != nil {
				t.Fatal(err)
			}
			if out, err := execIn(n, "nft", tc.tamper...); err != nil {
				t.Fatalf("tamper: %v\n%s", err, out)
			}
			if err := CheckPodQoS(c, "net1", samplePlan()); err == nil {
				t.Fatal("CheckPodQoS passed on a tampered table")
			}
		})
	}
	t.Run("other plan", func(t *testing.T) {
		n := podNS(t)
		c := conn(t, n)
		if err := ApplyPodQoS(c, "net1", samplePlan()); err != nil {
			t.Fatal(err)
		}
		if err := CheckPodQoS(c, "net1", qos.Compile(&qos.Spec{DSCP: intp(10)})); err == nil {
			t.Fatal("CheckPodQoS passed against another plan")
		}
	})
}

func TestApplyPodReplacesAndDeleteIsIdempotent(t *testing.T) {
	n := podNS(t)
	c := conn(t, n)
	if err := ApplyPodQoS(c, "net1", samplePlan()); err != nil {
		t.Fatal(err)
	}
	small := qos.Compile(&qos.Spec{DSCP: intp(10)})
	if err := ApplyPodQoS(c, "net1", small); err != nil {
		t.Fatalf("re-apply: %v", err)
	}
	if err := CheckPodQoS(c, "net1", small); err != nil {
		t.Fatalf("after re-apply: %v", err)
	}
	// The inet table an older netclass made goes as well.
	if out, err := execIn(n, "nft", "add", "table", "inet", "netclass_net1"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := DeletePodQoS(c, "net1"); err != nil { // the netdev one only, as if it were gone
		t.Fatal(err)
	}
	if out, err := execIn(n, "nft", "add", "table", "inet", "netclass_net1"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if ok, err := HasAnyPodQoS(c, "net1"); err != nil || !ok {
		t.Fatalf("HasAnyPodQoS with an older netclass's table = %v, %v", ok, err)
	}
	for range 2 {
		if err := DeletePodQoS(c, "net1"); err != nil {
			t.Fatalf("DeletePodQoS: %v", err)
		}
	}
	if ok, err := HasPodQoS(c, "net1"); err != nil || ok {
		t.Fatalf("HasPodQoS after delete = %v, %v", ok, err)
	}
	if got := nftList(t, n, "tables"); got != "" {
		t.Errorf("tables left: %s", got)
	}
}
