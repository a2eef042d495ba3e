package ruleagent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/plugins/podpolicy"
	"github.com/netclass-dev/netclass/shim/checkpoint"
)

// apply syncs the pending attachments holding their claims' locks, all at
// once; when that wait is too long (a claim busy with a slow CNI call),
// claim by claim, so a busy claim delays only its own rules.
func (a *Agent) apply(ctx context.Context, todo []pending) []Outcome {
	if len(todo) == 0 {
		return nil
	}
	var uids []types.UID
	for _, p := range todo {
		uids = append(uids, p.claim)
	}
	if outs, err := a.applyLocked(ctx, uids, todo); err == nil {
		return outs
	}
	var outs []Outcome
	for _, uid := range slices.Compact(slices.Sorted(slices.Values(uids))) {
		mine := slices.DeleteFunc(slices.Clone(todo), func(p pending) bool { return p.claim != uid })
		got, err := a.applyLocked(ctx, []types.UID{uid}, mine)
		if err != nil {
			for _, p := range mine {
				p.out.Err = fmt.Errorf("pod %s interface %s: claim busy: %w", p.out.Pod, p.out.IfName, err)
				p.out.QoSErr = p.out.Err
				got = append(got, p.out)
			}
		}
		outs = append(outs, got...)
	}
	return outs
}

func (a *Agent) applyLocked(ctx context.Context, uids []types.UID, todo []pending) ([]Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, ClaimWait)
	defer cancel()
	var outs []Outcome
	err := a.claims.Locked(ctx, uids, func(now map[types.UID]*checkpoint.Claim) error {
		var live []pending
		for _, p := range todo {
			if stillAttached(now[p.claim], p.at) {
				live = append(live, p)
			}
		}
		qosRes, polRes := a.syncKernel(live)
		for i, p := range live {
			outs = append(outs, a.record(p, qosRes[i], polRes[i]))
		}
		return nil
	})
	return outs, err
}

// syncKernel syncs the QoS and policy plans of the attachments, a result
// of each per attachment (the zero Result for a plan that is not synced).
func (a *Agent) syncKernel(live []pending) (qosRes []Result, polRes []podpolicy.Result) {
	qosRes, polRes = make([]Result, len(live)), make([]podpolicy.Result, len(live))
	var items []Item
	var polItems []podpolicy.Interface
	var at, polAt []int
	for i, p := range live {
		if p.qos != nil {
			items, at = append(items, p.qosItem()), append(at, i)
		}
		if p.policy != nil {
			item := policyItem(p.at, p.policy)
			held := a.appliedPolicy(p.key)
			item.Prev, item.Port = held.plan(), held.port
			polItems, polAt = append(polItems, item), append(polAt, i)
		}
	}
	if len(items) > 0 {
		for j, r := range a.kernel(items) {
			qosRes[at[j]] = r
		}
	}
	if len(polItems) > 0 {
		for j, r := range a.NetPol.Kernel(polItems) {
			polRes[polAt[j]] = r
		}
	}
	return qosRes, polRes
}

// stillAttached reports whether the claim's record still holds the
// attachment (the same sandbox's interface, attached).
func stillAttached(c *checkpoint.Claim, at checkpoint.Attachment) bool {
	if c == nil {
		return false
	}
	for _, d := range c.Devices {
		for _, cur := range d.Attachments {
			if cur.SandboxID == at.SandboxID && cur.IfName == at.IfName && cur.NetNS == at.NetNS {
				return cur.State == checkpoint.Attached
			}
		}
	}
	return false
}

// record keeps what the kernel now holds and returns the outcome.
func (a *Agent) record(p pending, qr Result, pr podpolicy.Result) Outcome {
	a.mu.Lock()
	defer a.mu.Unlock()
	p.out.Changed, p.out.PolicyChanged = qr.Changed, pr.Changed
	if p.qos != nil {
		if qr.Err != nil {
			delete(a.applied, p.key) // unknown now: read the kernel next time
			p.out.QoSErr = fmt.Errorf("pod %s interface %s: %w", p.out.Pod, p.out.IfName, qr.Err)
			p.out.Err = errors.Join(p.out.Err, p.out.QoSErr)
		} else {
			a.applied[p.key] = p.qosItem()
		}
	}
	if p.policy != nil {
		if pr.Err != nil {
			delete(a.appliedPol, p.key)
			p.out.PolicyErr = pr.Err
			p.out.Err = errors.Join(p.out.Err, fmt.Errorf("pod %s interface %s: %w", p.out.Pod, p.out.IfName, pr.Err))
		} else {
			a.appliedPol[p.key] = heldPolicy{iface: policyItem(p.at, p.policy), port: pr.Port}
		}
	}
	return p.out
}

// report logs the outcomes and hands them to Observe.
func (a *Agent) report(ctx context.Context, outs []Outcome) {
	log := klog.FromContext(ctx)
	seen := map[string]string{}
	defer func() {
		a.mu.Lock()
		a.logged = seen
		a.mu.Unlock()
	}()
	for _, o := range outs {
		switch {
		case o.Err != nil && a.firstTime("error", o, o.Err, seen):
			log.Error(o.Err, "Rules not applied", "pod", o.Pod, "interface", o.IfName, "network", o.Network.String())
		case o.Changed || o.PolicyChanged:
			log.V(2).Info("Rules updated", "pod", o.Pod, "interface", o.IfName, "network", o.Network.String(),
				"networkQoS", o.Selected, "qosChanged", o.Changed, "networkPolicies", o.Policies, "policyChanged", o.PolicyChanged)
		}
		if o.PolicyIgnored != nil && a.firstTime("policy", o, o.PolicyIgnored, seen) {
			log.Info("Some NetworkPolicy rules are not enforced (what they allow stays closed)", "pod", o.Pod, "network", o.Network.String(), "reason", o.PolicyIgnored.Error())
		}
		if o.Ignored != nil && a.firstTime("qos", o, o.Ignored, seen) {
			log.Info("Some NetworkQoS rules are not applied", "pod", o.Pod, "network", o.Network.String(), "reason", o.Ignored.Error())
		}
	}
	if a.Observe != nil {
		a.Observe(ctx, outs)
	}
}

// firstTime reports whether the attachment's problem of that kind is new
// or changed since the last sync (a lasting one is logged once; Events say
// it while it lasts), and records it in seen, this sync's problems.
func (a *Agent) firstTime(kind string, o Outcome, err error, seen map[string]string) bool {
	key := fmt.Sprintf("%s/%s/%s/%s", kind, o.PodUID, o.IfName, o.Network)
	seen[key] = err.Error()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.logged[key] != err.Error()
}
