package nft

import (
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/test/nstest"
)

func intp(v int) *int { return &v }

func samplePlan() *qos.Plan {
	return qos.Compile(&qos.Spec{
		DSCP: intp(46),
		Egress: []qos.Rule{
			{Priority: 10, DSCP: intp(20), Classifier: qos.Classifier{
				To:    []qos.Peer{{IPBlock: &qos.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8"}}}},
				Ports: []qos.Port{{Protocol: "TCP", Port: intp(80)}},
			}, Bandwidth: &qos.Bandwidth{Rate: 1000, Burst: 1000}},
			{Priority: 5, DSCP: intp(8), Classifier: qos.Classifier{
				To:    []qos.Peer{{IPBlock: &qos.IPBlock{CIDR: "fd00::/8"}}},
				Ports: []qos.Port{{Protocol: "UDP"}},
			}},
		},
	})
}

func conn(t *testing.T, n *nstest.NS) *nftables.Conn {
	t.Helper()
	c, err := Open(n.Fd(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func nftList(t *testing.T, n *nstest.NS, what ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", n.Name, "nft", "list"}, what...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list %v: %v\n%s", what, err, out)
	}
	return string(out)
}

func TestQoSTableMatchesNftSyntax(t *testing.T) {
	n := nstest.New(t)
	c := conn(t, n)
	if err := ApplyQoS(c, "net1", samplePlan()); err != nil {
		t.Fatal(err)
	}
	got := nftList(t, n, "table", "inet", "netclass_net1")
	// What nft itself prints for the rules we mean: proof that the
	// hand-built expressions are the statements they claim to be.
	for _, want := range []string{
		"elements = { 0.0.0.0-9.255.255.255, 11.0.0.0-255.255.255.255 }",
		"elements = { fd00::/8 }",
		`oifname "net1" ip daddr @r0_v4 tcp dport 80 goto r0`,
		`oifname "net1" ip6 daddr @r1_v6 meta l4proto udp goto r1`,
		`oifname "net1" ip dscp set ef`,
		`oifname "net1" ip6 dscp set ef`,
		"ip dscp set af22\n\t\tip6 dscp set af22\n\t\tlimit rate over 125000 bytes/second drop\n\t\taccept",
		"ip dscp set cs1\n\t\tip6 dscp set cs1\n\t\taccept",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("nft list lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "goto r0") > strings.Index(got, "goto r1") {
		t.Errorf("the priority 10 rule must be evaluated before the priority 5 rule:\n%s", got)
	}
	if err := CheckQoS(c, "net1", samplePlan()); err != nil {
		t.Fatalf("CheckQoS right after ApplyQoS: %v", err)
	}
}

func TestCheckQoSNoticesChanges(t *testing.T) {
	tests := []struct {
		name   string
		tamper []string // nft command run in the namespace
	}{
		{"rule deleted", []string{"flush", "chain", "inet", "netclass_net1", "r0"}},
		{"table deleted", []string{"delete", "table", "inet", "netclass_net1"}},
		{"set element removed", []string{"delete", "element", "inet", "netclass_net1", "r0_v4", "{", "11.0.0.0-255.255.255.255", "}"}},
		{"rule added", []string{"add", "rule", "inet", "netclass_net1", "egress", "accept"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := nstest.New(t)
			c := conn(t, n)
			if err := ApplyQoS(c, "net1", samplePlan()); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("ip", append([]string{"netns", "exec", n.Name, "nft"}, tc.tamper...)...).CombinedOutput(); err != nil {
				t.Fatalf("tamper: %v\n%s", err, out)
			}
			if err := CheckQoS(c, "net1", samplePlan()); err == nil {
				t.Fatal("CheckQoS passed on a tampered table")
			}
		})
	}
	t.Run("other plan", func(t *testing.T) {
		n := nstest.New(t)
		c := conn(t, n)
		if err := ApplyQoS(c, "net1", samplePlan()); err != nil {
			t.Fatal(err)
		}
		other := qos.Compile(&qos.Spec{DSCP: intp(10)})
		if err := CheckQoS(c, "net1", other); err == nil {
			t.Fatal("CheckQoS passed against another plan")
		}
	})
}

func TestApplyReplacesAndDeleteIsIdempotent(t *testing.T) {
	n := nstest.New(t)
	c := conn(t, n)
	if err := ApplyQoS(c, "net1", samplePlan()); err != nil {
		t.Fatal(err)
	}
	small := qos.Compile(&qos.Spec{DSCP: intp(10)})
	if err := ApplyQoS(c, "net1", small); err != nil {
		t.Fatalf("re-apply: %v", err)
	}
	if err := CheckQoS(c, "net1", small); err != nil {
		t.Fatalf("after re-apply: %v", err)
	}
	for range 2 {
		if err := DeleteQoS(c, "net1"); err != nil {
			t.Fatalf("DeleteQoS: %v", err)
		}
	}
	if ok, err := HasQoS(c, "net1"); err != nil || ok {
		t.Fatalf("HasQoS after delete = %v, %v", ok, err)
	}
}

func TestSpoofCheck(t *testing.T) {
	n := nstest.New(t)
	c := conn(t, n)
	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	if err := ApplySpoofCheck(c, "nc0123", mac); err != nil {
		t.Fatal(err)
	}
	got := nftList(t, n, "table", "bridge", SpoofCheckTable("nc0123"))
	if want := `iifname "nc0123" ether saddr != 02:00:00:00:00:01 drop`; !strings.Contains(got, want) {
		t.Errorf("nft list lacks %q:\n%s", want, got)
	}
	if err := CheckSpoofCheck(c, "nc0123", mac); err != nil {
		t.Fatal(err)
	}
	other, _ := net.ParseMAC("02:00:00:00:00:02")
	if err := CheckSpoofCheck(c, "nc0123", other); err == nil {
		t.Fatal("CheckSpoofCheck passed for another MAC")
	}
	if err := DeleteSpoofCheck(c, "nc0123"); err != nil {
		t.Fatal(err)
	}
	if err := DeleteSpoofCheck(c, "nc0123"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

func TestLimitBurst(t *testing.T) {
	tests := []struct {
		rate, bucket uint64
		want         uint32
	}{
		{125000, 125000, 0},     // a bucket of one second: no extra burst
		{125000, 50000, 0},      // smaller than one second: clamped to one second
		{125000, 1125000, 1e6},  // nine seconds' worth beyond the first
		{1, 1 << 40, 1<<32 - 1}, // saturates
	}
	for _, tc := range tests {
		if got := limitBurst(tc.rate, tc.bucket); got != tc.want {
			t.Errorf("limitBurst(%d, %d) = %d, want %d", tc.rate, tc.bucket, got, tc.want)
		}
	}
}
