//go:build testbed

package bench

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
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
	offsets, perNode := map[string]int64{}, map[string]int{}
	for _, n := range e.Nodes {
		offsets[n.Name] = logSize(b, e.DRAOn(n.Name))
	}
	start := time.Now()
	err := parallel(startPods, 10, func(j int) error {
		node := e.Nodes[j%len(e.Nodes)].Name
		_, err := e.Kube.CoreV1().Pods(ns).Create(context.Background(), harness.PodOn(node, ns, fmt.Sprintf("p%02d", j)), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatalf("create pods: %v", err)
	}
	for j := range startPods {
		perNode[e.Nodes[j%len(e.Nodes)].Name]++
	}
	waitAllRunning(b, e, ns)
	wall := time.Since(start)
	for _, n := range e.Nodes {
		got := primaryTimings(b, e.DRAOn(n.Name), offsets[n.Name], ns, perNode[n.Name], selected)
		p50, p99 := percentile(got, 50), percentile(got, 99)
		b.Logf("node %s, NetworkQoS selecting the pods %v: netclass's part of RunPodSandbox p50 %v p99 %v max %v; all running after %v",
			n.Name, selected, p50, p99, percentile(got, 100), wall)
		b.ReportMetric(ms(p99), fmt.Sprintf("ms-p99-selected-%v-%s", selected, n.Name))
		b.ReportMetric(wall.Seconds(), fmt.Sprintf("s-all-running-selected-%v", selected))
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
	testbed.Poll(b, testbed.Context(b, time.Minute), 200*time.Millisecond, fmt.Sprintf("%d sandboxes in %s's log", want, d.Node),
		func(context.Context) (bool, string, error) {
			raw, err := os.ReadFile(d.LogPath)
			if err != nil {
				return false, "", err
			}
			got = nil
			for _, line := range strings.Split(string(raw[min(offset, int64(len(raw))):]), "\n") {
				m := primaryLine.FindStringSubmatch(line)
				if m == nil || m[1] != ns {
					continue
				}
				if (m[2] == "true") != selected {
					return false, "", fmt.Errorf("pod of %s logged guarded=%s", ns, m[2])
				}
				got = append(got, msDuration(m[3]))
			}
			return len(got) >= want, fmt.Sprintf("%d", len(got)), nil
		})
	return got
}
