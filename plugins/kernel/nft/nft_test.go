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
	c, err := openIn(n.Fd(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseLasting() })
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

func execIn(n *nstest.NS, name string, args ...string) ([]byte, error) {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...).CombinedOutput()
}
