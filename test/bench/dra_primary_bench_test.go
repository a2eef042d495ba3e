//go:build testbed

package bench

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// primaryLine matches netclass-dra's "Sandbox recorded" log line (-v=2):
// its part of every pod's RunPodSandbox, claim or not.
var primaryLine = regexp.MustCompile(`"Sandbox recorded" pod="([^"/]+)/[^"]+" guarded=(true|false) elapsedMs=([0-9.]+)`)

// BenchmarkDRAStartPrimary50Pods: 50 pods without claims (the default
// network only), created at once and spread over the nodes, first in a
// namespace without NetworkQoS, then in one whose NetworkQoS (no
// networkSelectors) selects them all: netclass-dra's part of each pod's
// RunPodSandbox (recording the sandbox; with the object, the rules of its
// eth0 in place before its containers start), p50/p99 per node, and the
// time until all 50 run. Target: p99 < 200 ms, as for attachments.
func BenchmarkDRAStartPrimary50Pods(b *testing.B) {
	e := harness.Shared(b)
	for range b.N {
		for _, selected := range []bool{false, true} {
			ns := testbed.Namespace(b, e.Kube)
			if selected {
				q := &ncv1.NetworkQoS{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"},
					Spec: ncv1.NetworkQoSSpec{Egress: []ncv1.Rule{{DSCP: 18}}}}
				if _, err := e.NC.NetclassV1alpha1().NetworkQoSes(ns).Create(context.Background(), q, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			startPrimaryPods(b, e, ns, selected)
		}
	}
}

func startPrimaryPods(b *testing.B, e *harness.Env, ns string, selected bool) {
	run := startAll(b, e, ns)
	for _, n := range e.Nodes {
		got := primaryTimings(b, e.DRAOn(n.Name), run.offsets[n.Name], ns, run.perNode[n.Name], selected)
		p50, p99 := percentile(got, 50), percentile(got, 99)
		b.Logf("node %s, NetworkQoS selecting the pods %v: netclass's part of RunPodSandbox p50 %v p99 %v max %v; all running after %v",
			n.Name, selected, p50, p99, percentile(got, 100), run.wall)
		b.ReportMetric(ms(p99), fmt.Sprintf("ms-p99-selected-%v-%s", selected, n.Name))
		b.ReportMetric(run.wall.Seconds(), fmt.Sprintf("s-all-running-selected-%v", selected))
		if p99 > 200*time.Millisecond {
			b.Errorf("node %s: p99 %v, want < 200 ms", n.Name, p99)
		}
	}
}

// primaryTimings waits until a node's daemon logged want sandboxes of
// namespace ns after offset, each guarded as selected says, and returns
// how long each took.
func primaryTimings(b *testing.B, d *harness.DRA, offset int64, ns string, want int, selected bool) []time.Duration {
	var got []time.Duration
	for _, m := range logLines(b, d, offset, primaryLine, ns, want, "sandboxes") {
		if (m[2] == "true") != selected {
			b.Fatalf("a pod of %s logged guarded=%s, want %v", ns, m[2], selected)
		}
		got = append(got, msDuration(m[3]))
	}
	return got
}
