//go:build vmtest

package bench

import (
	"encoding/json"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/plugins/bridgeport"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/traffic"
	"github.com/netclass-dev/netclass/test/vm/guest"
)

// Latency under load: a pod's egress shaped to 20 Mbit/s, saturated by one
// TCP bulk flow (ECN-capable), while a second flow pings through the same
// shaper. The figures are the probes' RTT (p50, p99), idle and under load,
// the bulk flow's rate, and what the queue dropped and marked. Run in the
// VM (make bench-vm): this machine's kernel has neither fq_codel nor cake.
const (
	latencyRate, latencyBurst = 20_000_000, 100_000 // bits/s, bits
	probeInterval             = 20 * time.Millisecond
	loadWarmup, loadTime      = 3 * time.Second, 10 * time.Second
	// Targets: the bulk flow keeps the configured rate; with the default
	// queue the probes' p99 under load stays within 10 ms of the idle RTT
	// (their p99 too: under emulation the idle tail is itself several ms of
	// scheduling noise, which is not delay the queue added).
	rateTolerance  = 0.10
	latencyAllowed = 10 * time.Millisecond
)

// latencyRun is one measurement with one queue.
type latencyRun struct {
	idleP50, idleP99, p50, p99 time.Duration
	lost                       int
	bulkBps                    float64
	retransmits                int
	dropped, marked            int
}

// BenchmarkLatencyUnderLoad measures tbf alone, the default queue (fq_codel
// under the tbf) and cake, one run per iteration, and fails when a target
// is missed.
func BenchmarkLatencyUnderLoad(b *testing.B) {
	guest.Require(b, guest.FQCodel, guest.Cake)
	for _, queue := range []string{"tbf", "fq_codel", "cake"} {
		b.Run(queue, func(b *testing.B) {
			var r latencyRun
			for range b.N {
				r = measureLatency(b, queue)
			}
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			b.ReportMetric(ms(r.idleP50), "idle-p50-ms")
			b.ReportMetric(ms(r.idleP99), "idle-p99-ms")
			b.ReportMetric(ms(r.p50), "load-p50-ms")
			b.ReportMetric(ms(r.p99), "load-p99-ms")
			b.ReportMetric(r.bulkBps/1e6, "bulk-Mbit/s")
			b.ReportMetric(float64(r.dropped), "dropped")
			b.ReportMetric(float64(r.marked), "ecn-marked")
			b.Logf("%s: idle p50 %.1f ms p99 %.1f ms; under load p50 %.1f ms p99 %.1f ms (%d probes lost); bulk %.2f Mbit/s (%d retransmits); queue dropped %d, ECN-marked %d",
				queue, ms(r.idleP50), ms(r.idleP99), ms(r.p50), ms(r.p99), r.lost, r.bulkBps/1e6, r.retransmits, r.dropped, r.marked)
			if d := r.bulkBps/latencyRate - 1; d < -rateTolerance || d > rateTolerance {
				b.Errorf("%s: the bulk flow got %.2f Mbit/s, not within %.0f%% of %.0f", queue, r.bulkBps/1e6, rateTolerance*100, latencyRate/1e6)
			}
			if queue == "fq_codel" && r.p99 > r.idleP99+latencyAllowed {
				b.Errorf("default queue: p99 RTT under load %.1f ms > idle p99 %.1f ms + %v", ms(r.p99), ms(r.idleP99), latencyAllowed)
			}
		})
	}
}

func measureLatency(b *testing.B, queue string) latencyRun {
	b.Helper()
	h := cnitest.NewHost(b)
	dataDir, ipamDir := b.TempDir(), b.TempDir()
	conf := func(qos map[string]any) []byte {
		c := map[string]any{"cniVersion": "1.1.0", "name": "lat", "type": "netclass-bridge", "bridge": "latbr0",
			"dataDir": dataDir, "ipam": map[string]any{"type": "host-local", "dataDir": ipamDir,
				"ranges": []any{[]any{map[string]any{"subnet": "10.92.0.0/24"}}}}}
		if qos != nil {
			c["qos"] = qos
		}
		raw, err := json.Marshal(c)
		if err != nil {
			b.Fatal(err)
		}
		return raw
	}
	shaped, sink := cnitest.NewPod(b), cnitest.NewPod(b)
	h.Add(b, "netclass-bridge", conf(map[string]any{"egressRate": latencyRate, "egressBurst": latencyBurst, "queue": queue}), shaped, "net1")
	dst := cnitest.Addr(b, h.Add(b, "netclass-bridge", conf(nil), sink, "net1"), false)
	if out, err := exec.Command("ip", "netns", "exec", shaped.NS.Name, "sysctl", "-qw", "net.ipv4.tcp_ecn=1").CombinedOutput(); err != nil {
		b.Fatalf("sysctl tcp_ecn: %v\n%s", err, out)
	}
	var r latencyRun
	idle, _, err := traffic.RTTs(shaped.NS, dst, 100, probeInterval)
	if err != nil {
		b.Fatal(err)
	}
	r.idleP50, r.idleP99 = traffic.Quantile(idle, 0.5), traffic.Quantile(idle, 0.99)
	type bulk struct {
		res traffic.IPerf3Result
		err error
	}
	done := make(chan bulk, 1)
	go func() {
		res, err := traffic.IPerf3{Client: shaped.NS, Server: sink.NS, Addr: dst, Port: 5301, Duration: loadTime, Omit: loadWarmup}.Run()
		done <- bulk{res, err}
	}()
	// The probes run through the whole stream; those of its warm-up (and
	// of the iperf3 handshake) are left out.
	loaded, lost, err := traffic.RTTs(shaped.NS, dst, int((loadWarmup+loadTime)/probeInterval), probeInterval)
	if err != nil {
		b.Fatal(err)
	}
	bk := <-done
	if bk.err != nil || bk.res.Error != "" {
		b.Fatalf("bulk flow: %v %s", bk.err, bk.res.Error)
	}
	skip := min(len(loaded), int(loadWarmup/probeInterval))
	r.p50, r.p99, r.lost = traffic.Quantile(loaded[skip:], 0.5), traffic.Quantile(loaded[skip:], 0.99), lost
	r.bulkBps, r.retransmits = bk.res.ReceivedBps, bk.res.Retransmits
	r.dropped, r.marked = queueStats(b, h, qosport.HostIFBName(bridgeport.HostVethName(shaped.ID, "net1")))
	return r
}

var (
	droppedRe = regexp.MustCompile(`\(dropped (\d+),`)
	markedRe  = regexp.MustCompile(`ecn_mark (\d+)|\n\s*marks\s+(\d+)`)
)

// queueStats reads what the shaper's qdiscs dropped and ECN-marked (tc -s).
func queueStats(b *testing.B, h *cnitest.Host, dev string) (dropped, marked int) {
	b.Helper()
	out, err := exec.Command("tc", "-n", h.NS.Name, "-s", "qdisc", "show", "dev", dev).CombinedOutput()
	if err != nil {
		b.Fatalf("tc -s qdisc show dev %s: %v\n%s", dev, err, out)
	}
	if m := droppedRe.FindSubmatch(out); m != nil { // the root qdisc's: its children's included
		dropped, _ = strconv.Atoi(string(m[1]))
	}
	for _, m := range markedRe.FindAllSubmatch(out, -1) {
		v, _ := strconv.Atoi(string(append(m[1], m[2]...)))
		marked += v
	}
	return dropped, marked
}
