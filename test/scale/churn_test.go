//go:build scale

package scale

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/test/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// config is the churn's size: NETCLASS_SCALE_PODS pods at least (1000), in
// waves of NETCLASS_SCALE_WAVE (100), for NETCLASS_SCALE_DURATION at least
// (10m), on NETCLASS_SCALE_NODES nodes at least (3).
type config struct {
	pods, wave, nodes int
	duration          time.Duration
}

func configFromEnv(t *testing.T) config {
	t.Helper()
	c := config{pods: 1000, wave: 100, nodes: 3, duration: 10 * time.Minute}
	for name, dst := range map[string]*int{"NETCLASS_SCALE_PODS": &c.pods, "NETCLASS_SCALE_WAVE": &c.wave, "NETCLASS_SCALE_NODES": &c.nodes} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive integer", name, v)
			}
			*dst = n
		}
	}
	if v := os.Getenv("NETCLASS_SCALE_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("NETCLASS_SCALE_DURATION=%q: %v", v, err)
		}
		c.duration = d
	}
	return c
}

// TestChurn creates and deletes pods with claims on two networks (a
// node-local bridge PodNetwork and a VXLAN Network across the nodes), all
// selected by a NetworkQoS and a NetworkPolicy, in waves spread over the
// nodes, until it has made the configured number of pods and run for the
// configured time, on the configured number of nodes (nodes the bed lacks
// join for the test and leave at its end). Every pod must run; afterwards
// each node must be as it was after a first pod on each node came and went
// (links, qdiscs, nftables ruleset, IPAM
// reservations, plugin records, checkpoint records) and no ResourceClaim
// of the namespace may remain; netclass-dra's goroutines must be back to
// their level and its RSS near it. It reports each wave's pod start
// (creation to Ready, as a list every 250 ms sees it) p50/p99 and
// each daemon's CPU.
func TestChurn(t *testing.T) {
	cfg := configFromEnv(t)
	e := harness.Shared(t)
	for len(e.Nodes) < cfg.nodes {
		n := e.AddNode(t, "") // leaves the bed when the test ends
		t.Logf("node %s joined the test bed for the churn", n.Name)
	}
	w := newWorld(t, e)
	// A first pod on each node makes what stays while the networks are
	// offered (the PodNetwork's bridge, the shared nftables tables): the
	// state to come back to is the node's after it has gone.
	warm := w.wave(t, 0, len(e.Nodes))
	if warm.failed > 0 {
		t.Fatalf("%d of the first pods did not run", warm.failed)
	}
	before := takeSnapshot(t, e)
	start := time.Now()
	var waves []waveResult
	for made := 0; made < cfg.pods || time.Since(start) < cfg.duration; made += cfg.wave {
		r := w.wave(t, len(waves)+1, cfg.wave)
		t.Logf("wave %2d: %d pods, start p50 %v p99 %v max %v, %d failed; all gone %v after the delete", r.index, len(r.starts),
			r.pct(50), r.pct(99), r.pct(100), r.failed, r.deleted.Round(time.Millisecond))
		waves = append(waves, r)
	}
	failed, pods := 0, 0
	for _, r := range waves {
		failed, pods = failed+r.failed, pods+len(r.starts)+r.failed
	}
	t.Logf("%d pods in %d waves over %v, %d failed", pods, len(waves), time.Since(start).Round(time.Second), failed)
	if failed > 0 {
		t.Errorf("%d pods did not run", failed)
	}
	settled(t, e, w.ns, before)
}

// waveResult is one wave's pod starts and failures.
type waveResult struct {
	index   int
	starts  []time.Duration
	failed  int
	deleted time.Duration
}

// pct is the p-th percentile of the wave's starts (100: the longest).
func (r waveResult) pct(p int) time.Duration {
	if len(r.starts) == 0 {
		return 0
	}
	s := slices.Clone(r.starts)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))].Round(time.Millisecond)
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func podName(wave, i int) string { return fmt.Sprintf("w%02d-%03d", wave, i) }
