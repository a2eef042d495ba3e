// A measurement of the shared scheduler's guarantee at 100 Mbit/s: it needs
// this machine's CPU, not the VM suite's emulated one (where the four
// streams together reach ~89 Mbit/s, CPU-bound, and no scheduler can give
// each allocated pod its share). The kernel features it uses (htb, ifb,
// vxlan) are this machine's, so it runs here only.

//go:build !vmtest

package vxlan

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/traffic"
)

// TestBandwidthShareAcrossNodes: on VNI 500 with 100 Mbit/s per node,
// three pods allocated 30 Mbit/s and a best-effort pod on node 1 send to
// node 2 through the VXLAN device at once: each allocated pod's receiver
// gets 27 to 33 Mbit/s, the best-effort pod's what is left. Their DELs
// leave no class, table or record behind.
func TestBandwidthShareAcrossNodes(t *testing.T) {
	n1, n2 := twoNodes(t)
	share := func(guarantee int64) map[string]any {
		if guarantee == 0 {
			return nil
		}
		// as netclass-dra renders it: the allocation is also the ceiling
		// of the pod's own egress shaper (a tbf on its host end's IFB)
		return map[string]any{"bandwidthShare": netconf.BandwidthShare{Capacity: 100e6, Guarantee: guarantee},
			"qos": map[string]any{"egressRate": guarantee, "egressBurst": guarantee / 100}}
	}
	var senders []*cnitest.Pod
	var confs [][]byte
	for i := range 4 {
		guarantee := int64(30e6)
		if i == 3 {
			guarantee = 0
		}
		conf := n1.conf(t, "blue", 500, "10.64.0.0/24", "10.64.0.10", "10.64.0.19", share(guarantee))
		p := cnitest.NewPod(t)
		r := n1.Add(t, plugin, conf, p, "net1")
		if err := n1.Check(t, plugin, conf, r, p, "net1"); err != nil {
			t.Errorf("CHECK of pod %d: %v", i, err)
		}
		senders, confs = append(senders, p), append(confs, conf)
	}
	recv := cnitest.NewPod(t)
	rr := n2.Add(t, plugin, n2.conf(t, "blue", 500, "10.64.0.0/24", "10.64.0.20", "10.64.0.29", nil), recv, "net1")
	got := make([]float64, 4)
	var wg sync.WaitGroup
	for i, p := range senders {
		wg.Go(func() {
			r := traffic.IPerf3{Client: p.NS, Server: recv.NS, Addr: ip4(t, rr), Port: uint16(5301 + i), Duration: 6 * time.Second, Omit: time.Second}
			res, err := r.Run()
			if err != nil || res.Error != "" {
				t.Errorf("iperf3 from pod %d: %v %s", i, err, res.Error)
			}
			got[i] = res.ReceivedBps
		})
	}
	wg.Wait()
	for i, bps := range got {
		t.Logf("pod %d (allocated %v) received %.1f Mbit/s", i, i < 3, bps/1e6)
		if i < 3 && (bps < 27e6 || bps > 33e6) {
			t.Errorf("allocated pod %d received %.1f Mbit/s, want 27 to 33", i, bps/1e6)
		}
	}
	if got[3] < 1e6 || got[3] > 15e6 {
		t.Errorf("the best-effort pod received %.1f Mbit/s, want what is left of 100 (about 10)", got[3]/1e6)
	}
	for i, p := range senders {
		if err := n1.Del(plugin, confs[i], p, "net1"); err != nil {
			t.Fatal(err)
		}
	}
	noShareLeft(t, n1)
}

// noShareLeft: node 1 has no shared scheduler, share table or record.
func noShareLeft(t *testing.T, n *node) {
	t.Helper()
	if n.NS.HasLink(t, "ncvx500") {
		if out := n.NS.Output(t, "tc", "qdisc", "show", "dev", "ncvx500"); strings.Contains(out, "htb") {
			t.Errorf("the shared scheduler outlived the last DEL: %s", out)
		}
	}
	if out := n.NS.Ruleset(t); strings.Contains(out, "netclass_share_") {
		t.Errorf("the share table outlived the last DEL: %s", out)
	}
	if _, err := os.Stat(filepath.Join(n.dataDir, "bandwidth-share", fmt.Sprintf("ncvx%d.json", 500))); !os.IsNotExist(err) {
		t.Errorf("the record outlived the last DEL: %v", err)
	}
}
