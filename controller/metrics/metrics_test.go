package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Every reconciler's queue registers on one registry: the same series,
// told apart by the controller label; all of them pass Prometheus' lint.
func TestQueuesShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	for _, name := range []string{"podnetwork", "networkclass", "clusternetwork", "network", "networkqos"} {
		q := NewQueue(name)
		if err := reg.Register(q); err != nil {
			t.Fatalf("register %s: %v", name, err)
		}
		q.ObserveReconcile(Success, time.Millisecond)
		q.NewAddsMetric(name).Inc()
		q.NewLatencyMetric(name).Observe(0.01)
	}
	if err := reg.Register(NewQueue("network")); err == nil {
		t.Error("two queues of one name registered")
	}
	m, err := NewManager(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.SetLeader(true)
	want := `
# HELP netclass_controller_leader 1 while this instance runs the reconcilers (holds the leader Lease, or leader election is off), else 0.
# TYPE netclass_controller_leader gauge
netclass_controller_leader 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "netclass_controller_leader"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "netclass_controller_reconciles_total"); err != nil || n != 5 {
		t.Errorf("%d reconcile series, want 5 (%v)", n, err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "netclass_controller_") {
			t.Errorf("series %s is not named netclass_controller_*", f.GetName())
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
	var none *Manager
	none.SetLeader(true)
}

func TestRegistererTravelsInTheContext(t *testing.T) {
	if Registerer(context.Background()) != nil {
		t.Error("a bare context carries a registry")
	}
	reg := prometheus.NewRegistry()
	if Registerer(WithRegisterer(context.Background(), reg)) != reg {
		t.Error("the registry was lost")
	}
}
