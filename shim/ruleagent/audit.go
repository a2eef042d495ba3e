package ruleagent

import (
	"context"
	"maps"
	"slices"
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
// Policies are checked with NetPol.Check, QoS rules with CheckQoS; it does
// nothing without either. (The primary interfaces' QoS is not audited.)
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
// record (nil: none, or not audited).
type auditee struct {
	key string
	pol *heldPolicy
	qos *Item
}

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
		if err := a.CheckQoS(*e.qos); err != nil && a.forgetQoS(e.key, *e.qos) {
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
	polAudited := a.NetPol != nil && a.NetPol.Check != nil
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := make([]string, 0, len(a.appliedPol)+len(a.applied))
	if polAudited {
		keys = slices.AppendSeq(keys, maps.Keys(a.appliedPol))
	}
	if a.CheckQoS != nil {
		keys = slices.AppendSeq(keys, maps.Keys(a.applied))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if len(keys) == 0 {
		return auditee{}, 0
	}
	i, found := slices.BinarySearch(keys, last)
	if found {
		i++
	}
	e := auditee{key: keys[i%len(keys)]}
	if held, ok := a.appliedPol[e.key]; ok && polAudited {
		e.pol = &held
	}
	if item, ok := a.applied[e.key]; ok && a.CheckQoS != nil {
		e.qos = &item
	}
	return e, len(keys)
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

// forgetQoS is forgetPolicy for the attachment's QoS record.
func (a *Agent) forgetQoS(key string, held Item) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cur, ok := a.applied[key]; !ok || cur.Plan != held.Plan {
		return false
	}
	delete(a.applied, key)
	return true
}
