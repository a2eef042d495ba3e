package ruleagent

import (
	"errors"
	"fmt"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/render"
)

// Desired is the plan one attachment enforces: its own qos (base) with the
// rules of the NetworkQoS objects that select its pod, by the pod's own
// labels, on its network, destinations resolved to the selected pods'
// current addresses. Rules that cannot be compiled are left out and
// reported in ignored (so are rules marking with a DSCP the network's
// policy, target.Network.DSCPPolicy, leaves out); the plan is nil only when
// the result is not a valid qos block, or when the base asks for a DSCP
// the policy no longer allows (nothing can be applied then). selected
// names the objects that select the pod. It is pure but for peers, which
// reads caches.
func Desired(base *qos.Spec, objs []*ncv1.NetworkQoS, target render.Target, peers render.Peers) (plan *qos.Plan, selected []string, ignored, err error) {
	rules, selected, ignored := render.Rules(objs, target, peers)
	spec := render.WithRules(base, rules)
	spec.Policy = target.Network.DSCPPolicy // the network's as it is now, whatever base was made under
	if err := errors.Join(spec.Validate(field.Path("qos")), spec.Policy.Check(base, "qos")); err != nil {
		return nil, selected, ignored, fmt.Errorf("the qos of %s with its NetworkQoS rules: %w", target.Network.Ref, err)
	}
	return qos.Compile(spec), selected, ignored, nil
}
