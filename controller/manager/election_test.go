package manager

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	ncfake "github.com/netclass-dev/netclass/api/generated/clientset/versioned/fake"
	"github.com/netclass-dev/netclass/controller/metrics"
)

type instance struct {
	cl   clients
	reg  *prometheus.Registry
	done chan error
}

// start runs one leader-elected instance on the shared fake clients.
func start(ctx context.Context, t *testing.T, kube *kubefake.Clientset, nc *ncfake.Clientset, id string) *instance {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.NewManager(reg)
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{reg: reg, done: make(chan error, 1),
		cl: clients{kube: kube, nc: nc, recorder: record.NewFakeRecorder(100), probes: &probes{elect: true}, metrics: m}}
	opts := Options{LeaderElect: true, Identity: id}.withDefaults()
	go func() { in.done <- runElected(metrics.WithRegisterer(ctx, reg), in.cl, opts) }()
	return in
}

func (in *instance) readyMsg() string {
	msg, err := in.cl.probes.Ready()
	if err != nil {
		return ""
	}
	return msg
}

// Two replicas: the one that takes the Lease runs the reconcilers and is
// ready once its caches synced; the other stands by, ready too. Only the
// leader exports the reconcilers' metrics, and says it leads.
func TestLeaderAndStandbyAreReady(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kube, nc := kubefake.NewClientset(), ncfake.NewSimpleClientset()
	a := start(ctx, t, kube, nc, "a")
	for a.readyMsg() != "leading, caches synced" {
		if ctx.Err() != nil {
			_, err := a.cl.probes.Ready()
			t.Fatalf("the first instance never led with synced caches: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // polling the probe: leader election has no event to wait on
	}
	b := start(ctx, t, kube, nc, "b")
	for b.readyMsg() != "standing by: a leads" {
		if ctx.Err() != nil {
			_, err := b.cl.probes.Ready()
			t.Fatalf("the second instance never stood by: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n, err := testutil.GatherAndCount(a.reg, "netclass_controller_workqueue_depth"); err != nil || n != 6 { // podnetwork, networkclass, clusternetwork, nodeindex, network, networkqos
		t.Errorf("leader: %d workqueue depth series, want one per reconciler (%v)", n, err)
	}
	if n, err := testutil.GatherAndCount(b.reg, "netclass_controller_workqueue_depth"); err != nil || n != 0 {
		t.Errorf("standby: %d workqueue series, want none (%v)", n, err)
	}
	for in, want := range map[*instance]string{a: "1", b: "0"} {
		exp := "# HELP netclass_controller_leader 1 while this instance runs the reconcilers (holds the leader Lease, or leader election is off), else 0.\n" +
			"# TYPE netclass_controller_leader gauge\nnetclass_controller_leader " + want + "\n"
		if err := testutil.GatherAndCompare(in.reg, strings.NewReader(exp), "netclass_controller_leader"); err != nil {
			t.Error(err)
		}
	}
	cancel()
	for _, in := range []*instance{a, b} {
		if err := <-in.done; err != nil {
			t.Errorf("stopping: %v", err)
		}
	}
}
