package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/nstest"
)

// rssPasses is how many ADD+DEL of each chain measure peak RSS.
const rssPasses = 5

// Shaping both ways, as kubelet's bandwidth capability would ask.
const (
	ingressBits, ingressBurst = 50_000_000, 500_000
	egressBits, egressBurst   = 10_000_000, 200_000
)

func conflist(b *testing.B, name string, plugins ...map[string]any) *libcni.NetworkConfigList {
	b.Helper()
	raw, err := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": name, "plugins": plugins})
	if err != nil {
		b.Fatal(err)
	}
	l, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

func hostLocal(b *testing.B, subnet string) map[string]any {
	return map[string]any{"type": "host-local", "dataDir": b.TempDir(), "ranges": []any{[]any{map[string]any{"subnet": subnet}}}}
}

// BenchmarkBridgeQoSVsUpstream measures one ADD+DEL per iteration of each
// chain, interleaved (alternating which goes first), and reports both
// per-attachment times, their ratio and each side's peak plugin RSS.
//
//	netclass: netclass-bridge with qos (DSCP marking + shaping both ways, tbf alone)
//	upstream: bridge + bandwidth (the same shaping, no DSCP)
func BenchmarkBridgeQoSVsUpstream(b *testing.B) {
	h := cnitest.NewHost(b)
	ex := newRSSExec()
	cni := libcni.NewCNIConfigWithCacheDir([]string{h.Dir}, b.TempDir(), ex)
	ours := conflist(b, "nc", map[string]any{
		"type": "netclass-bridge", "bridge": "ncbench0", "isGateway": true, "dataDir": b.TempDir(),
		"ipam": hostLocal(b, "10.90.0.0/16"),
		// queue tbf: the shaper alone, as upstream's bandwidth plugin
		// shapes (the default puts fq_codel under it, more work, and on a
		// kernel without sch_fq_codel asks the kernel for the module on
		// every ADD before falling back to tbf alone)
		"qos": map[string]any{"dscp": 46, "ingressRate": ingressBits, "ingressBurst": ingressBurst,
			"egressRate": egressBits, "egressBurst": egressBurst, "queue": "tbf"},
	})
	upstream := conflist(b, "up",
		map[string]any{"type": "bridge", "bridge": "upbench0", "isGateway": true, "ipam": hostLocal(b, "10.91.0.0/16")},
		map[string]any{"type": "bandwidth", "ingressRate": ingressBits, "ingressBurst": ingressBurst,
			"egressRate": egressBits, "egressBurst": egressBurst},
	)
	var oursTime, upTime, oursDel, upDel time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		pod := nstest.New(b)
		b.StartTimer()
		first, second := ours, upstream
		if i%2 == 1 {
			first, second = upstream, ours
		}
		for _, l := range []*libcni.NetworkConfigList{first, second} {
			took, del := addDel(b, h, cni, l, pod, fmt.Sprintf("bench-%d", i))
			if l == ours {
				oursTime, oursDel = oursTime+took, oursDel+del
			} else {
				upTime, upDel = upTime+took, upDel+del
			}
		}
		b.StopTimer()
		if err := pod.Delete(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	// Peak RSS, in separate passes through GNU time (see rssExec).
	ex.measure = true
	for i := range rssPasses {
		pod := nstest.New(b)
		for _, l := range []*libcni.NetworkConfigList{ours, upstream} {
			addDel(b, h, cni, l, pod, fmt.Sprintf("rss-%d", i))
		}
	}
	n := float64(b.N)
	oursMs, upMs := oursTime.Seconds()*1000/n, upTime.Seconds()*1000/n
	oursRSS := ex.peak(filepath.Join(h.Dir, "netclass-bridge"))
	upRSS := ex.peak(filepath.Join(h.Dir, "bridge"), filepath.Join(h.Dir, "bandwidth"))
	b.ReportMetric(oursMs, "netclass-ms/attach")
	b.ReportMetric(upMs, "upstream-ms/attach")
	b.ReportMetric(oursMs/upMs, "time-ratio")
	b.ReportMetric(oursDel.Seconds()*1000/n, "netclass-del-ms")
	b.ReportMetric(upDel.Seconds()*1000/n, "upstream-del-ms")
	b.ReportMetric(float64(oursRSS), "netclass-peak-KiB")
	b.ReportMetric(float64(upRSS), "upstream-peak-KiB")
	b.ReportMetric(0, "ns/op") // the per-iteration total mixes both chains: not meaningful
}

// addDel runs ADD then DEL of the list for the pod's net1 inside the host
// namespace and returns the wall time of both, and of the DEL alone.
func addDel(b *testing.B, h *cnitest.Host, cni *libcni.CNIConfig, l *libcni.NetworkConfigList, pod *nstest.NS, id string) (took, del time.Duration) {
	b.Helper()
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: pod.Path, IfName: "net1"}
	h.NS.Do(b, func() error {
		ctx := context.Background()
		start := time.Now()
		if _, err := cni.AddNetworkList(ctx, l, rt); err != nil {
			return fmt.Errorf("%s ADD: %w", l.Name, err)
		}
		delStart := time.Now()
		if err := cni.DelNetworkList(ctx, l, rt); err != nil {
			return fmt.Errorf("%s DEL: %w", l.Name, err)
		}
		took, del = time.Since(start), time.Since(delStart)
		return nil
	})
	return took, del
}
