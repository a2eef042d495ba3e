//go:build scale

package scale

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// nodeState is what a node holds that a pod's attachments add to: host
// links, qdiscs, the nftables ruleset, IPAM reservations and plugin
// records on disk, netclass-dra's checkpoint records.
type nodeState struct {
	links, qdiscs, ruleset, files string
	records                       int
}

// process is netclass-dra's own figures, from its /metrics.
type process struct {
	goroutines, rss, cpu float64
}

type snapshot struct {
	nodes map[string]nodeState
	procs map[string]process
}

// takeSnapshot reads every node's state and daemon figures.
func takeSnapshot(t *testing.T, e *harness.Env) snapshot {
	t.Helper()
	s := snapshot{nodes: map[string]nodeState{}, procs: map[string]process{}}
	for _, n := range e.Nodes {
		st, err := readNode(e, n)
		if err != nil {
			t.Fatal(err)
		}
		s.nodes[n.Name] = st
		s.procs[n.Name] = readProcess(t, e.DRAOn(n.Name))
	}
	return s
}

func readProcess(t *testing.T, d *harness.DRA) process {
	t.Helper()
	m, err := d.Metrics(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"go_goroutines", "process_resident_memory_bytes", "process_cpu_seconds_total"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("netclass-dra on node %s: no %s in /metrics", d.Node, k)
		}
	}
	return process{goroutines: m["go_goroutines"], rss: m["process_resident_memory_bytes"], cpu: m["process_cpu_seconds_total"]}
}

var linkIndex = regexp.MustCompile(`(?m)^\d+: `)

func readNode(e *harness.Env, n bed.Node) (nodeState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var st nodeState
	for _, c := range []struct {
		dst  *string
		args []string
	}{{&st.links, []string{"ip", "-o", "link", "show"}}, {&st.qdiscs, []string{"tc", "qdisc", "show"}}, {&st.ruleset, []string{"nft", "--stateless", "list", "ruleset"}}} {
		out, err := n.Output(ctx, c.args[0], c.args[1:]...)
		if err != nil {
			return st, err
		}
		*c.dst = out
	}
	st.links = sortedLines(linkIndex.ReplaceAllString(st.links, ""), func(l string) string { return strings.Fields(l)[0] })
	st.qdiscs = sortedLines(st.qdiscs, func(l string) string { return l })
	st.files = stateFiles(n, "/var/lib/cni/networks", "/var/lib/cni/netclass")
	claims, err := e.DRAOn(n.Name).Checkpoint()
	st.records = len(claims)
	return st, err
}

// sortedLines keeps key(line) of each line, sorted: names of links whose
// indexes change as links come and go.
func sortedLines(s string, key func(string) string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		l = strings.TrimSpace(l)
		if l != "" {
			out = append(out, key(l))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// stateFiles lists the files under the node's directories (IPAM
// reservations, plugin records), without the lock and last-reserved
// files that stay by design.
func stateFiles(n bed.Node, dirs ...string) string {
	var out []string
	for _, d := range dirs {
		root := n.HostPath(d)
		_ = filepath.WalkDir(root, func(path string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() || de.Name() == "lock" || strings.HasPrefix(de.Name(), "last_reserved_ip") || strings.HasSuffix(de.Name(), ".lock") {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			out = append(out, d+"/"+rel)
			return nil
		})
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// settled waits until every node is as it was before and no claim of the
// namespace is left, then checks and reports the daemons' figures.
func settled(t *testing.T, e *harness.Env, ns string, before snapshot) {
	t.Helper()
	for _, n := range e.Nodes {
		testbed.Poll(t, testbed.Context(t, 3*time.Minute), time.Second, "node "+n.Name+" as before the churn", func(context.Context) (bool, string, error) {
			now, err := readNode(e, n)
			if err != nil {
				return false, "", err
			}
			diff := diffState(before.nodes[n.Name], now)
			return diff == "", diff, nil
		})
	}
	testbed.Poll(t, testbed.Context(t, 2*time.Minute), time.Second, "no ResourceClaim left in "+ns, func(ctx context.Context) (bool, string, error) {
		l, err := e.Kube.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(l.Items) == 0, fmt.Sprintf("%d claims", len(l.Items)), nil
	})
	for _, n := range e.Nodes {
		checkProcess(t, n.Name, before.procs[n.Name], e.DRAOn(n.Name))
	}
}

func diffState(a, b nodeState) string {
	var out []string
	for _, f := range []struct{ what, a, b string }{{"links", a.links, b.links}, {"qdiscs", a.qdiscs, b.qdiscs},
		{"nftables ruleset", a.ruleset, b.ruleset}, {"IPAM and record files", a.files, b.files}} {
		if f.a != f.b {
			out = append(out, fmt.Sprintf("%s differ:\n--- before\n%s\n--- now\n%s", f.what, f.a, f.b))
		}
	}
	if a.records != b.records {
		out = append(out, fmt.Sprintf("checkpoint records: %d before, %d now", a.records, b.records))
	}
	return strings.Join(out, "\n")
}

// checkProcess waits (a minute at most) for the daemon's goroutines to be
// back to their level before (a few more for informers' and the agent's
// moving parts), checks that its RSS is within 64 MiB of it, and reports
// both with its CPU time over the churn.
func checkProcess(t *testing.T, node string, before process, d *harness.DRA) {
	t.Helper()
	var now process
	testbed.Poll(t, testbed.Context(t, time.Minute), time.Second, "netclass-dra on "+node+": goroutines back to their level", func(context.Context) (bool, string, error) {
		now = readProcess(t, d)
		return now.goroutines <= before.goroutines+5, fmt.Sprintf("%v goroutines, %v before", now.goroutines, before.goroutines), nil
	})
	t.Logf("netclass-dra on %s: goroutines %v -> %v, RSS %.1f -> %.1f MiB, CPU %.1f s over the churn", node,
		before.goroutines, now.goroutines, before.rss/(1<<20), now.rss/(1<<20), now.cpu-before.cpu)
	if now.rss > before.rss+64<<20 {
		t.Errorf("netclass-dra on %s: RSS %.1f MiB after the churn, %.1f MiB before", node, now.rss/(1<<20), before.rss/(1<<20))
	}
}
