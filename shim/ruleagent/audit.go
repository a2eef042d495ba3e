package ruleagent

import (
	"context"
	"slices"
	"time"

	"k8s.io/klog/v2"
)

// DefaultAuditPeriod is Agent.AuditPeriod when it is 0.
const DefaultAuditPeriod = time.Hour

// minAuditGap is the least time between two audit checks: a check reads
// an attachment's policy back, tens of ms on a port of many rules.
const minAuditGap = time.Second

// Audit checks the attachments' policies against the kernel until ctx
// ends, one attachment at a time, each once per period (AuditPeriod),
// checks at least minAuditGap apart. A sync touches only the attachments
// whose plans changed: a rule or set removed or changed behind netclass's
// back (an administrator's nft, another agent, a pod with CAP_NET_ADMIN in
// its own namespace) would stay so until the plan changed. An attachment
// whose kernel state differs from its record loses the record, and the
// agent syncs: its policy is read back and put right. It does nothing
// without NetPol.Check.
func (a *Agent) Audit(ctx context.Context) {
	if a.NetPol == nil || a.NetPol.Check == nil {
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

// auditNext checks the recorded attachment whose key follows last (in key
// order, round robin) and returns its key and how many are recorded.
func (a *Agent) auditNext(ctx context.Context, last string) (string, int) {
	a.mu.Lock()
	keys := make([]string, 0, len(a.appliedPol))
	for k := range a.appliedPol {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		a.mu.Unlock()
		return "", 0
	}
	slices.Sort(keys)
	i, _ := slices.BinarySearch(keys, last)
	if i < len(keys) && keys[i] == last {
		i++
	}
	key := keys[i%len(keys)]
	held := a.appliedPol[key]
	a.mu.Unlock()
	item := held.iface
	if err := a.NetPol.Check(item); err != nil && a.forgetPolicy(key, held) {
		klog.FromContext(ctx).Info("NetworkPolicy rules differ from what was applied: syncing them again",
			"attachment", key, "interface", item.IfName, "netns", item.PodNS, "err", err)
		a.Trigger()
	}
	return key, len(keys)
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
