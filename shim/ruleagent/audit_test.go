package ruleagent

import (
	"context"
	"errors"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/plugins/podpolicy"
)

// The audit checks the recorded attachments one by one, in key order and
// round robin; one whose kernel state differs loses its record and the
// agent is triggered, and the next sync reads it back (no Prev) while the
// others stay skipped.
func TestAuditResyncsWhatDiffers(t *testing.T) {
	f := newFixture()
	var synced []podpolicy.Interface
	d := &drifts{drifted: map[string]bool{"/ns/a": true}}
	f.agent.NetPol = &NetPolicies{List: func(string) ([]*networkingv1.NetworkPolicy, error) { return nil, nil },
		Kernel: func(its []podpolicy.Interface) []podpolicy.Result {
			synced = append(synced, its...)
			return make([]podpolicy.Result, len(its))
		},
		Check: func(f podpolicy.Interface) error { return d.check(f.PodNS, f.IfName, f.Plan != nil) }}
	ctx := context.Background()
	f.agent.Sync(ctx)
	triggered := func() bool {
		select {
		case <-f.agent.trigger:
			return true
		default:
			return false
		}
	}
	keyA, n := f.agent.auditNext(ctx, "")
	if n != 2 || len(d.checked) != 1 || d.checked[0] != "/ns/a" || !triggered() {
		t.Fatalf("first audit: %d recorded, checked %v, want 2, [/ns/a] and a trigger", n, d.checked)
	}
	synced = nil
	f.agent.Sync(ctx)
	if len(synced) != 1 || synced[0].PodNS != "/ns/a" || synced[0].Prev != nil {
		t.Fatalf("the sync after the audit synced %+v, want /ns/a alone, read back", synced)
	}
	d.drifted["/ns/a"] = false
	keyB, _ := f.agent.auditNext(ctx, keyA)
	again, _ := f.agent.auditNext(ctx, keyB)
	if d.checked[1] != "/ns/b" || d.checked[2] != "/ns/a" || again != keyA || triggered() {
		t.Errorf("audits after: checked %v (want /ns/b then /ns/a again), no trigger", d.checked)
	}
	synced = nil
	f.agent.Sync(ctx)
	if len(synced) != 0 {
		t.Errorf("a sync after audits that found nothing synced %d", len(synced))
	}
}

// A record a sync replaced while its check ran is not dropped.
func TestAuditKeepsARecordChangedMeanwhile(t *testing.T) {
	a := New(nil, nil, nil, nil, nil, nil)
	old, cur := heldPolicy{iface: podpolicy.Interface{Plan: &netpol.Plan{}}}, heldPolicy{iface: podpolicy.Interface{Plan: &netpol.Plan{}}}
	a.appliedPol["k"] = cur
	if a.forgetPolicy("k", old) {
		t.Error("dropped a record that changed since its check")
	}
	if !a.forgetPolicy("k", cur) {
		t.Error("kept a record that did not change")
	}
}

func TestAuditGap(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{0, time.Minute},
		{1, time.Hour},
		{100, 36 * time.Second},
		{10000, minAuditGap},
	} {
		if got := auditGap(time.Hour, tc.n); got != tc.want {
			t.Errorf("%d recorded: %v, want %v", tc.n, got, tc.want)
		}
	}
}

// QoS rules are audited alike: an attachment whose rules differ loses its
// QoS record and the next sync syncs it (alone) again; an attachment with
// both records is one audit, both checked.
func TestAuditResyncsQoSThatDiffers(t *testing.T) {
	f := newFixture()
	f.policies["t1"] = append(f.policies["t1"], webQoS(46))
	d := &drifts{drifted: map[string]bool{"/ns/a": true}}
	f.agent.CheckQoS = func(it Item) error { return d.check(it.PodNS, it.IfName, it.Plan.NeedsRules()) }
	ctx := context.Background()
	f.agent.Sync(ctx)
	calls := f.kernel.calls
	key, n := f.agent.auditNext(ctx, "")
	if n != 2 || len(d.checked) != 1 || d.checked[0] != "/ns/a" {
		t.Fatalf("first audit: %d recorded, checked %v, want 2 and [/ns/a]", n, d.checked)
	}
	f.agent.Sync(ctx)
	if f.kernel.calls != calls+1 {
		t.Fatalf("the sync after the audit synced %d interfaces, want 1 (a's)", f.kernel.calls-calls)
	}
	d.drifted["/ns/a"] = false
	var polChecked int
	f.agent.NetPol = &NetPolicies{List: func(string) ([]*networkingv1.NetworkPolicy, error) { return nil, nil },
		Kernel: func(its []podpolicy.Interface) []podpolicy.Result { return make([]podpolicy.Result, len(its)) },
		Check:  func(podpolicy.Interface) error { polChecked++; return nil }}
	f.agent.Sync(ctx)
	calls = f.kernel.calls
	if _, n := f.agent.auditNext(ctx, key); n != 2 || polChecked != 1 || len(d.checked) != 2 || d.checked[1] != "/ns/b" {
		t.Errorf("audit of b with both records: %d recorded, %d policy checks, QoS checked %v", n, polChecked, d.checked)
	}
	f.agent.Sync(ctx)
	if f.kernel.calls != calls {
		t.Errorf("a sync after audits that found nothing synced %d", f.kernel.calls-calls)
	}
}

// drifts is an audit's fake check: it records the namespaces checked and
// fails those drifted, and a check without a plan or of another interface.
type drifts struct {
	drifted map[string]bool
	checked []string
}

func (d *drifts) check(podNS, ifname string, planned bool) error {
	d.checked = append(d.checked, podNS)
	if !planned || ifname != "net1" {
		return errors.New("checked without its plan or interface")
	}
	if d.drifted[podNS] {
		return errors.New("its rules differ")
	}
	return nil
}
