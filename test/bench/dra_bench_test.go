//go:build testbed

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/netclass-dev/netclass/api/contract"
	ncclient "github.com/netclass-dev/netclass/api/generated/clientset/versioned"
	mnv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// The netclass-dra benchmarks run against the test bed (`make testbed-up`,
// then `make bench` or `go test -tags testbed -run '^$' -bench DRA ./test/bench/`).
func TestMain(m *testing.M) { harness.Main(m) }

const (
	publishNetworks = 500
	startPods       = 50
)

// fastClient is a client for the benchmark's own bulk writes: the
// harness's default rate limit would dominate what is measured.
func fastClient(b *testing.B, e *harness.Env) ncclient.Interface {
	rc := rest.CopyConfig(e.Rest)
	rc.QPS, rc.Burst = 1000, 2000
	c, err := ncclient.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// parallel runs f for 0..n-1 on workers goroutines and returns the first error.
func parallel(n, workers int, f func(i int) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// BenchmarkDRAPublish500PodNetworks: from the creation of 500 PodNetworks
// until netclass-dra has published a device for each (the controller marks
// them Ready in between), and the daemon's memory afterwards.
func BenchmarkDRAPublish500PodNetworks(b *testing.B) {
	e := harness.Shared(b)
	class := e.Class(b, harness.PodNetworkKind)
	nc := fastClient(b, e)
	for i := range b.N {
		prefix := fmt.Sprintf("bench-pub-%s-%d-", harness.Unique(4), i)
		names := make([]string, publishNetworks)
		for j := range names {
			names[j] = fmt.Sprintf("%s%03d", prefix, j)
		}
		b.Cleanup(func() { deletePodNetworks(b, nc, names) })
		start := time.Now()
		err := parallel(len(names), 16, func(j int) error {
			// a bridge of its own each: two PodNetworks on one bridge are a SegmentConflict
			// (only one would be Ready and published); nothing creates the bridges here
			params, err := json.Marshal(harness.BridgeParams(fmt.Sprintf("bp%d-%03d", i, j), "10.240.0.0/24"))
			if err != nil {
				return err
			}
			pn := &mnv1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: names[j]},
				Spec: mnv1.PodNetworkSpec{Enabled: true, Provider: contract.DriverName, Parameters: runtime.RawExtension{Raw: params}}}
			_, err = nc.MultinetworkV1().PodNetworks().Create(context.Background(), pn, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			b.Fatalf("create PodNetworks: %v", err)
		}
		created := time.Since(start)
		readyAt := make(chan time.Duration, 1)
		go func() { readyAt <- waitReady(nc, names, start) }()
		slicesSeen := waitPublished(b, e, class, names)
		elapsed := time.Since(start)
		ready := <-readyAt
		b.Logf("created in %v, Ready (controller) after %v, published after %v", created, ready, elapsed)
		rss, peak, err := e.DRA.Memory()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(elapsed.Seconds(), "s-until-published")
		b.ReportMetric(created.Seconds(), "s-creating")
		b.ReportMetric(float64(rss)/(1<<20), "MiB-rss")
		b.ReportMetric(float64(peak)/(1<<20), "MiB-peak-rss")
		b.ReportMetric(float64(slicesSeen), "slices")
		if elapsed > 10*time.Second || peak > 100<<20 {
			b.Errorf("target missed: %v until published (want < 10 s), peak RSS %d MiB (want < 100)", elapsed, peak>>20)
		}
	}
}

// waitPublished polls node 1's slices until every name has a device of the
// class, and checks no slice exceeds the API's 128 devices.
func waitPublished(b *testing.B, e *harness.Env, class string, names []string) int {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var nSlices int
	testbed.Poll(b, testbed.Context(b, 2*time.Minute), 50*time.Millisecond, fmt.Sprintf("%d devices published", len(names)),
		func(ctx context.Context) (bool, string, error) {
			devs, err := e.Devices(ctx)
			if err != nil {
				return false, err.Error(), nil
			}
			bySlice := map[string]int{}
			found := 0
			for _, d := range devs {
				bySlice[d.Slice]++
				if d.Attr(contract.AttributeStdNetworkClass) == class && want[d.Attr(contract.AttributeStdPodNetwork)] {
					found++
				}
			}
			for s, n := range bySlice {
				if n > 128 {
					return false, "", fmt.Errorf("slice %s has %d devices", s, n)
				}
			}
			nSlices = len(bySlice)
			return found == len(names), fmt.Sprintf("%d of %d in %d slices", found, len(names), len(bySlice)), nil
		})
	return nSlices
}

// waitReady returns when every PodNetwork is Ready (or after two minutes).
func waitReady(nc ncclient.Interface, names []string, start time.Time) time.Duration {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		list, err := nc.MultinetworkV1().PodNetworks().List(context.Background(), metav1.ListOptions{})
		if err == nil {
			want := map[string]bool{}
			for _, n := range names {
				want[n] = true
			}
			ready := 0
			for _, pn := range list.Items {
				for _, c := range pn.Status.Conditions {
					if want[pn.Name] && c.Type == "Ready" && c.Status == metav1.ConditionTrue {
						ready++
					}
				}
			}
			if ready == len(names) {
				return time.Since(start)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return -1
}

func deletePodNetworks(b *testing.B, nc ncclient.Interface, names []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := parallel(len(names), 16, func(j int) error {
		err := nc.MultinetworkV1().PodNetworks().Delete(ctx, names[j], metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		b.Errorf("delete PodNetworks: %v", err)
	}
	for _, n := range names { // the controller's finalizer goes first
		for {
			_, err := nc.MultinetworkV1().PodNetworks().Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			select {
			case <-ctx.Done():
				b.Errorf("PodNetwork %s still there: %v", n, err)
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// BenchmarkDRAStart50Pods: 50 pods with a claim on one PodNetwork, created at
// once and spread evenly over the nodes (25 each on two). netclass's part of
// each pod's start is what each node's netclass-dra logs for it (at -v=2,
// "Pod's networks attached"): from RunPodSandbox's entry to the claim's
// status written, and the CNI ADD part inside NRI's budget; reported per node.
func BenchmarkDRAStart50Pods(b *testing.B) {
	e := harness.Shared(b)
	class := e.Class(b, harness.PodNetworkKind)
	bridge, pn := "bench"+harness.Unique(5), "bench-start-"+harness.Unique(6)
	// a bridge is node-local: each node's pods get the range on their own bridge
	e.PodNetwork(b, pn, harness.BridgeParams(bridge, "10.241.0.0/24"), nil, bridge)
	for _, n := range e.Nodes {
		e.WaitDeviceOn(b, n.Name, class, "", pn, true)
	}
	for i := range b.N {
		ns := testbed.Namespace(b, e.Kube)
		e.ClaimTemplate(b, ns, "net", class, "", pn, nil)
		run := startAll(b, e, ns, "net")
		for _, n := range e.Nodes {
			report(b, n.Name, nodeTimings(b, e.DRAOn(n.Name), run.offsets[n.Name], ns, run.perNode[n.Name]), run.perNode[n.Name], run.wall)
			reportCPU(b, n.Name, run.cpu[n.Name], cpuOf(b, e.DRAOn(n.Name)))
		}
		if i < b.N-1 {
			b.Logf("round %d done", i)
		}
	}
}

// startRun is one start of startPods pods: where each node's daemon log
// was before it, how many pods each node got, and how long until all ran.
type startRun struct {
	offsets map[string]int64
	perNode map[string]int
	wall    time.Duration
	// cpu is each node's netclass-dra's CPU times before the start.
	cpu map[string]harness.CPUTimes
}

// startAll creates startPods pods in ns at once (10 at a time), spread
// evenly over the nodes, with the named claim templates, and waits until
// all run.
func startAll(b *testing.B, e *harness.Env, ns string, claims ...string) startRun {
	run := startRun{offsets: map[string]int64{}, perNode: map[string]int{}, cpu: map[string]harness.CPUTimes{}}
	for _, n := range e.Nodes {
		run.offsets[n.Name] = logSize(b, e.DRAOn(n.Name))
		run.cpu[n.Name] = cpuOf(b, e.DRAOn(n.Name))
	}
	start := time.Now()
	err := parallel(startPods, 10, func(j int) error {
		node := e.Nodes[j%len(e.Nodes)].Name
		_, err := e.Kube.CoreV1().Pods(ns).Create(context.Background(), harness.PodOn(node, ns, fmt.Sprintf("p%02d", j), claims...), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatalf("create pods: %v", err)
	}
	for j := range startPods {
		run.perNode[e.Nodes[j%len(e.Nodes)].Name]++
	}
	waitAllRunning(b, e, ns)
	run.wall = time.Since(start)
	return run
}

func cpuOf(b *testing.B, d *harness.DRA) harness.CPUTimes {
	c, err := d.CPU()
	if err != nil {
		b.Fatalf("netclass-dra on node %s: %v", d.Node, err)
	}
	return c
}

// reportCPU reports the CPU a node's netclass-dra used from before the
// pods were created until the last claim status of the node was written:
// its own, and its plugins' (the CNI plugins it ran and their IPAM
// plugins, counted once they exited).
func reportCPU(b *testing.B, node string, before, after harness.CPUTimes) {
	self, plugins := after.Self-before.Self, after.Children-before.Children
	b.Logf("node %s: netclass-dra's CPU over the start %v, its plugins' %v", node, self, plugins)
	b.ReportMetric(self.Seconds(), "s-cpu-netclass-dra-"+node)
	b.ReportMetric(plugins.Seconds(), "s-cpu-plugins-"+node)
}

// timing is what a node's netclass-dra logged of one pod.
type timing struct {
	add, cni, total, status time.Duration
	failed                  bool
}

// timingLine matches netclass-dra's "Pod's networks attached" log line.
var timingLine = regexp.MustCompile(`"Pod's networks attached" pod="([^"/]+)/[^"]+".*addMs=([0-9.]+) cniMs=([0-9.]+) totalMs=([0-9.]+) statusMs=([0-9.]+) err=(.*)$`)

func logSize(b *testing.B, d *harness.DRA) int64 {
	st, err := os.Stat(d.LogPath)
	if err != nil {
		b.Fatalf("netclass-dra's log: %v", err)
	}
	return st.Size()
}

// nodeTimings waits until a node's daemon logged want pods of namespace ns
// after offset, and returns their timings.
func nodeTimings(b *testing.B, d *harness.DRA, offset int64, ns string, want int) []timing {
	var got []timing
	for _, m := range logLines(b, d, offset, timingLine, ns, want, "timings") {
		got = append(got, timing{add: msDuration(m[2]), cni: msDuration(m[3]), total: msDuration(m[4]), status: msDuration(m[5]),
			failed: strings.TrimSpace(m[6]) != "null"}) // klog writes a nil error as null
	}
	return got
}

// logLines waits until a node's daemon logged, after offset, want lines
// that re matches whose first group is ns, and returns their groups.
func logLines(b *testing.B, d *harness.DRA, offset int64, re *regexp.Regexp, ns string, want int, what string) [][]string {
	var got [][]string
	testbed.Poll(b, testbed.Context(b, time.Minute), 200*time.Millisecond, fmt.Sprintf("%d %s in %s's log", want, what, d.Node),
		func(context.Context) (bool, string, error) {
			raw, err := os.ReadFile(d.LogPath)
			if err != nil {
				return false, "", err
			}
			got = nil
			for _, line := range strings.Split(string(raw[min(offset, int64(len(raw))):]), "\n") {
				if m := re.FindStringSubmatch(line); m != nil && m[1] == ns {
					got = append(got, m)
				}
			}
			return len(got) >= want, fmt.Sprintf("%d", len(got)), nil
		})
	return got
}

func msDuration(s string) time.Duration {
	f, _ := strconv.ParseFloat(s, 64)
	return time.Duration(f * float64(time.Millisecond))
}

func waitAllRunning(b *testing.B, e *harness.Env, ns string) {
	testbed.Poll(b, testbed.Context(b, 5*time.Minute), 250*time.Millisecond, fmt.Sprintf("%d pods running", startPods),
		func(ctx context.Context) (bool, string, error) {
			pods, err := e.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			running := 0
			for _, p := range pods.Items {
				switch p.Status.Phase {
				case corev1.PodFailed, corev1.PodSucceeded:
					return false, "", fmt.Errorf("pod %s ended: %s", p.Name, p.Status.Phase)
				case corev1.PodRunning:
					running++
				}
			}
			return running == startPods, fmt.Sprintf("%d running", running), nil
		})
}

// The targets of the 50-pod start, p99 per node.
const (
	addTarget    = 100 * time.Millisecond
	statusTarget = 250 * time.Millisecond
)

func report(b *testing.B, node string, timings []timing, want int, wall time.Duration) {
	var add, cni, total, status []time.Duration
	failed := 0
	for _, tm := range timings {
		if tm.failed {
			failed++
			continue
		}
		add, cni, total, status = append(add, tm.add), append(cni, tm.cni), append(total, tm.total), append(status, tm.status)
	}
	if len(total) < want {
		b.Fatalf("node %s: %d of %d pods attached, %d attempts failed", node, len(total), want, failed)
	}
	b.Logf("node %s: netclass part p50 %v p99 %v max %v; ADD p50 %v p99 %v (the plugins' execs p50 %v p99 %v); status writes p50 %v p99 %v; %d failed; all running after %v",
		node, percentile(total, 50), percentile(total, 99), percentile(total, 100), percentile(add, 50), percentile(add, 99),
		percentile(cni, 50), percentile(cni, 99), percentile(status, 50), percentile(status, 99), failed, wall)
	b.ReportMetric(ms(percentile(total, 50)), "ms-p50-netclass-"+node)
	b.ReportMetric(ms(percentile(total, 99)), "ms-p99-netclass-"+node)
	b.ReportMetric(ms(percentile(add, 99)), "ms-p99-add-"+node)
	b.ReportMetric(float64(failed), "failed-attempts-"+node)
	b.ReportMetric(wall.Seconds(), "s-all-running")
	// Issue 26's targets: the part of RunPodSandbox netclass holds the
	// sandbox for (entry until every ADD is done and checkpointed), and
	// until the claims' statuses are written (after RunPodSandbox answers).
	addP99, totalP99 := percentile(add, 99), percentile(total, 99)
	if addP99 > addTarget || totalP99 > statusTarget || failed > 0 {
		b.Errorf("node %s: target missed: p99 of RunPodSandbox's netclass part %v (want < %v), until the claim status is written %v (want < %v), %d failed attempts (want 0)",
			node, addP99, addTarget, totalP99, statusTarget, failed)
	}
}
