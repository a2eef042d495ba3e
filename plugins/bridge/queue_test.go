package bridge

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/bridgeport"
	"github.com/netclass-dev/netclass/plugins/kernel/tc"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/traffic"
	"github.com/netclass-dev/netclass/test/vm/guest"
)

// qdiscs is what `tc qdisc show` prints for a link of the namespace.
func qdiscs(t *testing.T, ns *nstest.NS, dev string) string {
	t.Helper()
	out, err := exec.Command("tc", "-n", ns.Name, "qdisc", "show", "dev", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("tc qdisc show dev %s: %v\n%s", dev, err, out)
	}
	return string(out)
}

// TestQueueUnderTheShaper: both shapers of an attachment get the queue
// qos.queue names (fq_codel by default) and keep the configured rate. On a
// kernel without the queue: a named one is CNI error 7 naming qos.queue,
// leaving nothing behind; the default falls back to tbf alone with a
// warning on stderr, and CHECK accepts that. This machine's kernel lacks
// fq_codel and cake, the VM's has both: each suite proves its half.
func TestQueueUnderTheShaper(t *testing.T) {
	if guest.InVM() {
		guest.Require(t, guest.FQCodel, guest.Cake)
	}
	egress := traffic.Rate(20_000_000)
	for _, queue := range []string{"", "fq_codel", "cake", "tbf"} {
		name := queue
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			want := queue
			if want == "" {
				want = tc.QueueFQCodel
			}
			has, err := tc.HasQdisc(want)
			if err != nil {
				t.Fatal(err)
			}
			h := cnitest.NewHost(t)
			q := map[string]any{"egressRate": egress, "egressBurst": 100_000, "ingressRate": egress, "ingressBurst": 100_000}
			if queue != "" {
				q["queue"] = queue
			}
			n := newNetwork(t, "blue", "blue0", []string{"10.23.0.0/24"}, map[string]any{"qos": q})
			a := cnitest.NewPod(t)
			hostIf := bridgeport.HostVethName(a.ID, "net1")
			ifb := qosport.HostIFBName(hostIf)
			out, stderr, err := h.Run(a.Call(plugin, "ADD", "net1", n.bytes(t)))
			if queue != "" && !has {
				var e *types.Error
				if !errors.As(err, &e) || e.Code != types.ErrInvalidNetworkConfig || !strings.Contains(e.Msg, "qos.queue: this kernel has no "+want+" qdisc") {
					t.Fatalf("ADD with qos.queue %s on a kernel without it: %v, want CNI error 7 naming qos.queue", queue, err)
				}
				for _, l := range []string{hostIf, ifb} {
					if h.NS.HasLink(t, l) {
						t.Errorf("the refused ADD left %s", l)
					}
				}
				if a.NS.HasLink(t, "net1") {
					t.Error("the refused ADD left the pod's interface")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			warnings := netconf.Warnings(stderr)
			effective := want
			if !has {
				effective = tc.QueueTBF
				if len(warnings) != 2 || !strings.Contains(warnings[0], "tbf alone: this kernel has no fq_codel qdisc") {
					t.Errorf("the default queue fell back to tbf alone with warnings %q, want one per shaper; stderr:\n%s", warnings, stderr)
				}
			} else if len(warnings) != 0 {
				t.Errorf("warnings with the queue in place: %q", warnings)
			}
			for _, dev := range []string{hostIf, ifb} {
				checkQdiscs(t, qdiscs(t, h.NS, dev), effective)
			}
			res := mustResult(t, out)
			if err := h.Check(t, plugin, n.bytes(t), res, a, "net1"); err != nil {
				t.Errorf("CHECK: %v", err)
			}
			if has && queue != "tbf" {
				measureEgress(t, h, n, a, float64(egress))
			}
		})
	}
}

// checkQdiscs verifies tc's listing of a shaped link holds the queue.
func checkQdiscs(t *testing.T, show, queue string) {
	t.Helper()
	var want []string
	switch queue {
	case tc.QueueTBF:
		want = []string{"qdisc tbf 1: root"}
		if strings.Contains(show, "parent 1:1") {
			t.Errorf("tbf alone has a child:\n%s", show)
		}
	case tc.QueueFQCodel:
		want = []string{"qdisc tbf 1: root", "qdisc fq_codel 2: parent 1:1", " ecn "}
	case tc.QueueCake:
		want = []string{"qdisc cake 1: root", "bandwidth", "besteffort"}
	}
	for _, w := range want {
		if !strings.Contains(show, w) {
			t.Errorf("qdiscs lack %q (queue %s):\n%s", w, queue, show)
		}
	}
}

// measureEgress sends TCP from the shaped pod to a plain one for two
// seconds (after one of warm-up) and checks the rate.
func measureEgress(t *testing.T, h *cnitest.Host, shaped *network, a *cnitest.Pod, rate float64) {
	t.Helper()
	plain := newNetwork(t, "blue", "blue0", []string{"10.23.0.0/24"}, nil)
	plain.conf["ipam"], plain.conf["dataDir"] = shaped.conf["ipam"], shaped.conf["dataDir"]
	b := cnitest.NewPod(t)
	rb := h.Add(t, plugin, plain.bytes(t), b, "net1")
	res, err := traffic.IPerf3{Client: a.NS, Server: b.NS, Addr: podIP(t, rb, false), Port: 7011,
		Duration: 2 * time.Second, Omit: time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("egress through the queue: %.2f Mbit/s, configured %.2f", res.ReceivedBps/1e6, rate/1e6)
	if res.Error != "" || !within(res.ReceivedBps, rate, 0.2) {
		t.Errorf("egress through the queue: %.2f Mbit/s (%s), configured %.2f", res.ReceivedBps/1e6, res.Error, rate/1e6)
	}
}

func mustResult(t *testing.T, out []byte) *current.Result {
	t.Helper()
	r, err := current.NewResult(out)
	if err != nil {
		t.Fatalf("ADD result %s: %v", out, err)
	}
	return r.(*current.Result)
}
