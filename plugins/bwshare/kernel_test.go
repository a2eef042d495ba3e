package bwshare

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/plugins/kernel/tc"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/traffic"
)

// shareBed is a node in a namespace: a bridge with four pods' host ends and
// an uplink (a veth to the far namespace, standing for the VXLAN device)
// carrying a shared scheduler of 100 Mbit/s.
type shareBed struct {
	node, far *nstest.NS
	pods      []*nstest.NS
	dataDir   string
}

const (
	uplink   = "up0"
	capacity = 100_000_000
	alloc    = 30_000_000
)

func newShareBed(t *testing.T) *shareBed {
	b := &shareBed{node: nstest.New(t), far: nstest.New(t), dataDir: t.TempDir()}
	nstest.Veth(t, b.node, uplink, "", b.far, "eth0", "10.77.0.100/24")
	b.node.Bridge(t, "br0", uplink)
	for i := range 4 {
		p := nstest.New(t)
		nstest.Veth(t, p, "eth0", fmt.Sprintf("10.77.0.%d/24", 10+i), b.node, hostIf(i), "")
		b.node.Bridge(t, "br0", hostIf(i))
		b.pods = append(b.pods, p)
	}
	return b
}

func hostIf(i int) string { return fmt.Sprintf("vh%d", i) }

func (b *shareBed) mac(t *testing.T, i int) string {
	return b.pods[i].Link(t, "eth0").Attrs().HardwareAddr.String()
}

// join gives pods 0-2 30 Mbit/s each; pod 3 is best effort.
func (b *shareBed) join(t *testing.T, ceil int64) {
	for i := range 4 {
		rate := int64(alloc)
		if i == 3 {
			rate = 0
		}
		p := Port{HostIf: hostIf(i), MAC: b.mac(t, i), Rate: rate, Ceil: ceil}
		b.node.Do(t, func() error { return Join(b.dataDir, uplink, capacity, p) })
	}
}

// TestShareGuaranteesAllocations: three pods allocated 30 Mbit/s and a
// best-effort pod send at full speed at once through an uplink of 100
// Mbit/s; each allocated pod receives 27 to 33 Mbit/s, the best-effort pod
// what is left. Then every class and the table go with the last Leave.
func TestShareGuaranteesAllocations(t *testing.T) {
	b := newShareBed(t)
	b.join(t, 0)
	b.node.Do(t, func() error { return Check(b.dataDir, uplink, hostIf(0)) })
	got := b.contend(t, 6*time.Second)
	for i, bps := range got {
		t.Logf("pod %d received %.1f Mbit/s", i, bps/1e6)
	}
	for i := range 3 {
		if got[i] < 27e6 || got[i] > 33e6 {
			t.Errorf("allocated pod %d received %.1f Mbit/s, want 27 to 33", i, got[i]/1e6)
		}
	}
	if got[3] < 1e6 || got[3] > 15e6 {
		t.Errorf("the best-effort pod received %.1f Mbit/s, want what is left of 100 (about 10)", got[3]/1e6)
	}
	b.leaveAll(t)
}

// TestShareWorkConserving: with ceilings at the capacity, a lone allocated
// pod takes more than its allocation.
func TestShareWorkConserving(t *testing.T) {
	b := newShareBed(t)
	b.join(t, capacity)
	res := b.iperf(t, 0, 5201, 4*time.Second)
	t.Logf("a lone pod allocated 30 Mbit/s with ceil 100 received %.1f Mbit/s", res/1e6)
	if res < 60e6 || res > 110e6 {
		t.Errorf("lone pod with ceil = capacity received %.1f Mbit/s, want 60 to 110", res/1e6)
	}
	b.leaveAll(t)
}

// contend runs the four pods' streams at once and returns what each received.
func (b *shareBed) contend(t *testing.T, d time.Duration) []float64 {
	got := make([]float64, 4)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { got[i] = b.iperf(t, i, uint16(5201+i), d) })
	}
	wg.Wait()
	return got
}

func (b *shareBed) iperf(t *testing.T, i int, port uint16, d time.Duration) float64 {
	r := traffic.IPerf3{Client: b.pods[i], Server: b.far, Addr: netip.MustParseAddr("10.77.0.100"), Port: port,
		Duration: d, Omit: time.Second}
	res, err := r.Run()
	if err != nil || res.Error != "" {
		t.Errorf("iperf3 from pod %d: %v %s", i, err, res.Error)
	}
	return res.ReceivedBps
}

// leaveAll removes the pods one by one, and checks that nothing is left.
func (b *shareBed) leaveAll(t *testing.T) {
	for i := range 4 {
		b.node.Do(t, func() error { return Leave(b.dataDir, uplink, hostIf(i)) })
	}
	if out := b.node.Output(t, "tc", "qdisc", "show", "dev", uplink); strings.Contains(out, "htb") {
		t.Errorf("the shared scheduler outlived the last Leave: %s", out)
	}
	if out := b.node.Ruleset(t); out != "" {
		t.Errorf("the share table outlived the last Leave: %s", out)
	}
	if _, err := os.Stat(filepath.Join(b.dataDir, "bandwidth-share", uplink+".json")); !os.IsNotExist(err) {
		t.Errorf("the record outlived the last Leave: %v", err)
	}
}

// TestShareClassesFollowPorts: a Leave removes its class and only it; a
// port whose host end is gone without a Leave loses its class at the next
// Join; a pod's own SO_PRIORITY naming another's class does not move its
// frames there.
func TestShareClassesFollowPorts(t *testing.T) {
	b := newShareBed(t)
	b.join(t, 0)
	classes := func() map[uint32]*netlink.HtbClass {
		var cs map[uint32]*netlink.HtbClass
		b.node.Do(t, func() error {
			var err error
			cs, err = tc.ShareClasses(b.node.Link(t, uplink).Attrs().Index)
			return err
		})
		return cs
	}
	if got := len(classes()); got != 5 {
		t.Fatalf("%d classes, want the root, three pods' and the best effort's", got)
	}
	b.stealing(t, classes)
	b.node.Do(t, func() error { return Leave(b.dataDir, uplink, hostIf(0)) })
	if cs := classes(); len(cs) != 4 || cs[tc.ShareClassID(firstMinor)] != nil {
		t.Fatalf("after pod 0 left: classes %v, want its class 1:%x gone and three others", cs, firstMinor)
	}
	b.node.Do(t, func() error { return netlink.LinkDel(b.node.Link(t, hostIf(1))) })
	p := Port{HostIf: hostIf(0), MAC: b.mac(t, 0), Rate: alloc}
	b.node.Do(t, func() error { return Join(b.dataDir, uplink, capacity, p) })
	if cs := classes(); len(cs) != 4 || cs[tc.ShareClassID(firstMinor+1)] != nil {
		t.Fatalf("after pod 1's host end went and pod 0 joined again: classes %v, want pod 1's class gone", cs)
	}
	b.node.Do(t, func() error { return Check(b.dataDir, uplink, "") })
	for _, i := range []int{0, 2} {
		b.node.Do(t, func() error { return Leave(b.dataDir, uplink, hostIf(i)) })
	}
	if out := b.node.Ruleset(t); out != "" {
		t.Errorf("the share table outlived the last Leave: %s", out)
	}
}

// stealing: the best-effort pod sends with SO_PRIORITY = pod 0's class,
// and the node marks its frames with that class too as they enter the
// bridge (a kernel keeping skb->priority across namespaces, or any other
// marking, would leave it so); its packets are counted in the best-effort
// class, not pod 0's.
func (b *shareBed) stealing(t *testing.T, classes func() map[uint32]*netlink.HtbClass) {
	b.node.Output(t, "nft", "add", "table", "bridge", "steal")
	b.node.Output(t, "nft", "add", "chain", "bridge", "steal", "pre", "{ type filter hook prerouting priority 0; }")
	b.node.Output(t, "nft", "add", "rule", "bridge", "steal", "pre", "iifname", hostIf(3), "meta", "priority", "set", "1:2")
	defer b.node.Output(t, "nft", "delete", "table", "bridge", "steal")
	bytesOf := func(minor uint16) uint64 {
		c := classes()[tc.ShareClassID(minor)]
		if c == nil || c.Statistics == nil || c.Statistics.Basic == nil {
			t.Fatalf("no statistics of class 1:%x", minor)
		}
		return c.Statistics.Basic.Bytes
	}
	before0, beforeDef := bytesOf(firstMinor), bytesOf(tc.ShareDefaultMinor)
	if err := sendWithPriority(b.pods[3], "10.77.0.100", tc.ShareClassID(firstMinor), 100); err != nil {
		t.Fatal(err)
	}
	var d0, dDef uint64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) { // polling the counters with a deadline
		if d0, dDef = bytesOf(firstMinor)-before0, bytesOf(tc.ShareDefaultMinor)-beforeDef; dDef >= 90_000 {
			break
		}
	}
	t.Logf("100 datagrams of 1000 bytes with SO_PRIORITY 1:%x from the best-effort pod: class 1:%x +%d bytes, best effort +%d", firstMinor, firstMinor, d0, dDef)
	if d0 >= 10_000 || dDef < 90_000 {
		t.Fatalf("a pod's SO_PRIORITY moved its frames into another's class: +%d bytes there, +%d in best effort", d0, dDef)
	}
}
