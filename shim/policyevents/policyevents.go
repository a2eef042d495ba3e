// Package policyevents tells the owners of NetworkPolicies,
// MultiNetworkPolicies and ClusterNetworkPolicies what
// netclass-dra could not enforce of them on its node: Warning Events on
// the policy (ReasonPolicyNotEnforced for a rule left out of a pod's plan,
// ReasonPolicyEnforceFailed for a pod whose table could not be written),
// each once while it lasts.
package policyevents

import (
	"cmp"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/netpolicy"
	"github.com/netclass-dev/netclass/shim/ruleagent"
)

// Recorder turns the agent's outcomes into Events. Use one per node
// daemon; Observe is not safe for concurrent calls (the agent makes none).
type Recorder struct {
	Node   string
	Events record.EventRecorder
	// Policy returns a policy by kind (netpolicy.KindNetworkPolicy,
	// netpolicy.KindMultiNetworkPolicy, netpolicy.KindClusterNetworkPolicy
	// with no namespace), namespace and name (the informer's
	// cache), with its kind set (the Event refers to it).
	Policy func(kind, namespace, name string) (runtime.Object, error)

	reported map[Event]bool // what the last outcomes reported
}

// Event is one Event: its policy (kind, namespace, name), reason and
// message.
type Event struct {
	Kind, Namespace, Name, Reason, Message string
}

// Observe emits an Event for every problem of the outcomes that the
// previous outcomes did not have.
func (r *Recorder) Observe(outs []ruleagent.Outcome) {
	now := map[Event]bool{}
	for _, ev := range Problems(r.Node, outs) {
		now[ev] = true
		if r.reported[ev] {
			continue
		}
		p, err := r.Policy(ev.Kind, ev.Namespace, ev.Name)
		if err != nil {
			continue // deleted meanwhile
		}
		r.Events.Event(p, corev1.EventTypeWarning, ev.Reason, ev.Message)
	}
	r.reported = now
}

// Problems lists the Events the outcomes call for.
func Problems(node string, outs []ruleagent.Outcome) []Event {
	var out []Event
	for _, o := range outs {
		where := fmt.Sprintf("pod %s interface %s on network %s (node %s)", o.Pod, o.IfName, o.Network.String(), node)
		for _, re := range netpolicy.RuleErrors(o.PolicyIgnored) {
			kind := cmp.Or(re.Kind, netpolicy.KindNetworkPolicy)
			if re.Path == netpolicy.ScopePath { // the policy's own problem: one Event, whatever the pods
				out = append(out, Event{kind, re.Namespace, re.Name, contract.ReasonPolicyNetworksNotFound,
					fmt.Sprintf("node %s: %s: %v: the policy applies on no such network", node, re.Path, re.Err)})
				continue
			}
			effect := "what it allows stays closed"
			if kind == netpolicy.KindClusterNetworkPolicy {
				effect = "it fails closed (an Accept matches less, a Deny or Pass denies everything)"
			}
			out = append(out, Event{kind, re.Namespace, re.Name, contract.ReasonPolicyNotEnforced,
				fmt.Sprintf("%s: %s not enforced, %s: %v", where, re.Path, effect, re.Err)})
		}
		if o.PolicyErr == nil {
			continue
		}
		for _, name := range o.Policies {
			out = append(out, Event{netpolicy.KindNetworkPolicy, o.Pod.Namespace, name, contract.ReasonPolicyEnforceFailed,
				fmt.Sprintf("%s: rules not written: %v", where, o.PolicyErr)})
		}
		for _, name := range o.MultiPolicies {
			out = append(out, Event{netpolicy.KindMultiNetworkPolicy, o.Pod.Namespace, name, contract.ReasonPolicyEnforceFailed,
				fmt.Sprintf("%s: rules not written: %v", where, o.PolicyErr)})
		}
		for _, name := range o.ClusterPolicies {
			out = append(out, Event{netpolicy.KindClusterNetworkPolicy, "", name, contract.ReasonPolicyEnforceFailed,
				fmt.Sprintf("%s: rules not written: %v", where, o.PolicyErr)})
		}
	}
	return out
}
