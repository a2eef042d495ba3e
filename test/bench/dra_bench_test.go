//go:build testbed

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	ncclient "github.com/netclass-dev/netclass/api/generated/clientset/versioned"
	mnv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	"github.com/netclass-dev/netclass/shim/attachment"
	shimruntime "github.com/netclass-dev/netclass/shim/runtime"
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
				Spec: mnv1.PodNetworkSpec{Enabled: true, Provider: attachment.DriverName, Parameters: runtime.RawExtension{Raw: params}}}
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
				if d.Attr(attachment.AttributeStdNetworkClass) == class && want[d.Attr(attachment.AttributeStdPodNetwork)] {
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
// once. netclass's part of each pod's start is measured in netclass-dra (in
// this process): from RunPodSandbox's entry to the claim's status written,
// and the CNI ADD part inside NRI's budget. The pods run on node 1, the node
// of the in-process daemon.
func BenchmarkDRAStart50Pods(b *testing.B) {
	e := harness.Shared(b)
	class := e.Class(b, harness.PodNetworkKind)
	bridge, pn := "bench"+harness.Unique(5), "bench-start-"+harness.Unique(6)
	e.PodNetwork(b, pn, harness.BridgeParams(bridge, "10.241.0.0/24"), nil, bridge)
	e.WaitDevice(b, class, "", pn, true)
	var mu sync.Mutex
	var timings []shimruntime.Timing
	stop := e.InProcess(b, func(tm shimruntime.Timing) {
		mu.Lock()
		defer mu.Unlock()
		timings = append(timings, tm)
	})
	b.Cleanup(stop)
	for i := range b.N {
		mu.Lock()
		timings = nil
		mu.Unlock()
		ns := testbed.Namespace(b, e.Kube)
		e.ClaimTemplate(b, ns, "net", class, "", pn, nil)
		start := time.Now()
		err := parallel(startPods, 10, func(j int) error {
			_, err := e.Kube.CoreV1().Pods(ns).Create(context.Background(), harness.PodOn(e.Node, ns, fmt.Sprintf("p%02d", j), "net"), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			b.Fatalf("create pods: %v", err)
		}
		waitAllRunning(b, e, ns)
		wall := time.Since(start)
		mu.Lock()
		got := append([]shimruntime.Timing(nil), timings...)
		mu.Unlock()
		report(b, got, wall)
		if i < b.N-1 {
			b.Logf("round %d done", i)
		}
	}
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

func report(b *testing.B, timings []shimruntime.Timing, wall time.Duration) {
	var add, total []time.Duration
	failed := 0
	var budget time.Duration
	for _, tm := range timings {
		if tm.Err != nil {
			failed++
			continue
		}
		add, total = append(add, tm.Add), append(total, tm.Total)
		budget = tm.Budget
	}
	var status, calls []time.Duration
	for i, tm := range timings {
		if tm.Err == nil {
			status = append(status, total[len(status)]-add[len(status)])
			calls = append(calls, timings[i].Status)
		}
	}
	b.Logf("status written after ADD: p50 %v p99 %v (the API calls: p50 %v p99 %v)",
		percentile(status, 50), percentile(status, 99), percentile(calls, 50), percentile(calls, 99))
	if len(total) < startPods {
		b.Fatalf("%d of %d pods attached, %d attempts failed", len(total), startPods, failed)
	}
	b.Logf("netclass part p50 %v p99 %v max %v; ADD p50 %v p99 %v; budget %v; %d failed; all running after %v",
		percentile(total, 50), percentile(total, 99), percentile(total, 100), percentile(add, 50), percentile(add, 99), budget, failed, wall)
	b.ReportMetric(ms(percentile(total, 50)), "ms-p50-netclass")
	b.ReportMetric(ms(percentile(total, 99)), "ms-p99-netclass")
	b.ReportMetric(ms(percentile(add, 50)), "ms-p50-add")
	b.ReportMetric(ms(percentile(add, 99)), "ms-p99-add")
	b.ReportMetric(ms(budget), "ms-nri-budget")
	b.ReportMetric(float64(failed), "failed-attempts")
	b.ReportMetric(wall.Seconds(), "s-all-running")
	if p99 := percentile(total, 99); p99 > 200*time.Millisecond || failed > 0 {
		b.Errorf("target missed: p99 of netclass's part %v (want < 200 ms), %d failed attempts (want 0)", p99, failed)
	}
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
