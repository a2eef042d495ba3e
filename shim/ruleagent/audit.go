package ruleagent

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// DefaultAuditPeriod is Agent.AuditPeriod when it is 0.
const DefaultAuditPeriod = time.Hour

// minAuditGap is the least time between two audit checks: a check reads
// an attachment's policy back, tens of ms on a port of many rules.
const minAuditGap = time.Second

// Audit checks the attachments' policies and QoS rules against the kernel
// until ctx ends, one attachment at a time, each once per period
// (AuditPeriod), checks at least minAuditGap apart. A sync touches only the
// attachments whose plans changed: a rule or set removed or changed behind
// netclass's back (an administrator's nft, another agent, a pod with
// CAP_NET_ADMIN in its own namespace) would stay so until the plan
// changed. An attachment whose kernel state differs from its record loses
// the record, and the agent syncs: its rules are read back and put right.
// Policies are checked with NetPol.Check, QoS rules (the pods' primary
// interfaces' too) with CheckQoS; it does nothing without either.
func (a *Agent) Audit(ctx context.Context) {
	if (a.NetPol == nil || a.NetPol.Check == nil) && a.CheckQoS == nil {
		return
	}
	period := a.AuditPeriod
	if period <= 0 {
		period = DefaultAuditPeriod
	}
	last := ""
	for {
		var n int
		last, n = a.auditNext(ctx, last)
		select {
		case <-ctx.Done():
			return
		case <-time.After(auditGap(period, n)):
		}
	}
}

// auditGap is the wait after a check when n attachments are recorded:
// each is checked once per period, checks minAuditGap apart at least;
// with none recorded, a minute (a node's first pods are audited within
// the hour, not after it).
func auditGap(period time.Duration, n int) time.Duration {
	if n == 0 {
		return min(time.Minute, period)
	}
	return max(period/time.Duration(n), minAuditGap)
}

// auditee is a recorded attachment to audit: its policy record, its QoS
// record (nil: none, or not audited); primary: a sandbox's primary
// interface (its QoS record is the Primary's).
type auditee struct {
	key     string
	pol     *heldPolicy
	qos     *Item
	primary bool
}

// primaryAuditKey keeps the primary interfaces' keys apart from the
// attachments' in the audit's order.
const primaryAuditKey = "primary/"

// auditNext checks the recorded attachment whose key follows last (in key
// order, round robin) and returns its key and how many are recorded.
func (a *Agent) auditNext(ctx context.Context, last string) (string, int) {
	e, n := a.nextAuditee(last)
	if n == 0 {
		return "", 0
	}
	log := klog.FromContext(ctx).WithValues("attachment", e.key)
	differs := false
	if e.pol != nil {
		if err := a.NetPol.Check(e.pol.iface); err != nil && a.forgetPolicy(e.key, *e.pol) {
			log.Info("NetworkPolicy rules differ from what was applied: syncing them again",
				"interface", e.pol.iface.IfName, "netns", e.pol.iface.PodNS, "err", err)
			differs = true
		}
	}
	if e.qos != nil {
		if err := a.CheckQoS(*e.qos); err != nil && a.forgetQoS(e, *e.qos) {
			log.Info("NetworkQoS rules differ from what was applied: syncing them again",
				"interface", e.qos.IfName, "netns", e.qos.PodNS, "err", err)
			differs = true
		}
	}
	if differs {
		a.Trigger()
	}
	return e.key, n
}

// nextAuditee returns the recorded attachment whose key follows last, and
// how many are recorded (those with a record Audit checks).
func (a *Agent) nextAuditee(last string) (auditee, int) {
	recs := a.auditRecords()
	if len(recs) == 0 {
		return auditee{}, 0
	}
	keys := slices.Sorted(maps.Keys(recs))
	i, found := slices.BinarySearch(keys, last)
	if found {
		i++
	}
	return recs[keys[i%len(keys)]], len(keys)
}

// auditRecords gathers the records Audit checks, by key.
func (a *Agent) auditRecords() map[string]auditee {
	recs := map[string]auditee{}
	entry := func(key string) auditee { e := recs[key]; e.key = key; return e }
	a.mu.Lock()
	if a.NetPol != nil && a.NetPol.Check != nil {
		for key, held := range a.appliedPol {
			e := entry(key)
			e.pol = &held
			recs[key] = e
		}
	}
	if a.CheckQoS != nil {
		for key, item := range a.applied {
			e := entry(key)
			e.qos = &item
			recs[key] = e
		}
	}
	a.mu.Unlock()
	if a.CheckQoS != nil && a.Primary != nil {
		for key, item := range a.Primary.audited() {
			recs[primaryAuditKey+key] = auditee{key: primaryAuditKey + key, qos: &item, primary: true}
		}
	}
	return recs
}

// forgetPolicy drops the attachment's record if it is still held (a sync
// may have changed it meanwhile, the check then saw a change under way).
func (a *Agent) forgetPolicy(key string, held heldPolicy) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cur, ok := a.appliedPol[key]; !ok || cur.plan() != held.plan() {
		return false
	}
	delete(a.appliedPol, key)
	return true
}

// forgetQoS is forgetPolicy for the attachment's QoS record (for a primary
// interface: marks it unknown).
func (a *Agent) forgetQoS(e auditee, held Item) bool {
	if e.primary {
		return a.Primary.forget(strings.TrimPrefix(e.key, primaryAuditKey), held.Plan)
	}
	key := e.key
	a.mu.Lock()
	defer a.mu.Unlock()
	if cur, ok := a.applied[key]; !ok || cur.Plan != held.Plan {
		return false
	}
	delete(a.applied, key)
	return true
}
