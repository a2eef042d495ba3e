package ruleagent

import (
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
// reported in ignored; the plan is nil only when the result is not a valid
// qos block (nothing can be applied then). selected names the objects
// that select the pod. It is pure but for peers, which reads caches.
func Desired(base *qos.Spec, objs []*ncv1.NetworkQoS, target render.Target, peers render.Peers) (plan *qos.Plan, selected []string, ignored, err error) {
	rules, selected, ignored := render.Rules(objs, target, peers)
	spec := render.WithRules(base, rules)
	if err := spec.Validate(field.Path("qos")); err != nil {
		return nil, selected, ignored, fmt.Errorf("the qos of %s with its NetworkQoS rules: %w", target.Network.Ref, err)
	}
	return qos.Compile(spec), selected, ignored, nil
}
