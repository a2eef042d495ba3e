package ruleagent

import (
	"context"
	"slices"
	"strings"
	"testing"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/network"
)

// The network's DSCP policy (an admin's) bounds what a NetworkQoS gives
// its attachments: a rule marking with a value it leaves out is left out
// and named, the plan re-marks what the pod marks itself, and the agent
// follows the policy as the admin edits it; a base the policy no longer
// allows fails the attachment's plan without touching the kernel.
func TestDSCPPolicyOfTheNetwork(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	policy := &qos.DSCPPolicy{Allowed: []qos.DSCPRange{{First: 0, Last: 40}}}
	f.networks["blue"] = network.Network{Ref: blue, DSCPPolicy: policy}
	obj := webQoS(46)
	obj.Spec.Egress = append(obj.Spec.Egress, ncv1.Rule{DSCP: 10})
	f.policies["t1"] = []*ncv1.NetworkQoS{obj}

	out := outcomeOf(t, f.agent.Sync(ctx), "a")
	if got := rulesOf(t, f.kernel, "/ns/a/net1"); !slices.Equal(got, []uint8{10}) {
		t.Errorf("pod a holds rules %v, want only the allowed one [10]", got)
	}
	if out.Ignored == nil || !strings.Contains(out.Ignored.Error(), "NetworkQoS t1/web spec.egress[0]: dscp: 46 is not allowed by dscpPolicy (allowed 0-40)") {
		t.Errorf("the rule left out is not named: %v", out.Ignored)
	}
	if rm := f.kernel.plans["/ns/a/net1"].Remark; rm == nil || !slices.Equal(rm.Ranges, []qos.DSCPSpan{{From: 41, To: 63}}) {
		t.Errorf("pod a's plan re-marks %+v, want 41-63", rm)
	}

	f.networks["blue"] = network.Network{Ref: blue} // the admin drops the policy
	f.agent.Sync(ctx)
	if got := rulesOf(t, f.kernel, "/ns/a/net1"); len(got) != 2 || f.kernel.plans["/ns/a/net1"].Remark != nil {
		t.Errorf("without the policy pod a holds rules %v, re-marking %+v; want both rules, no re-marking", got, f.kernel.plans["/ns/a/net1"].Remark)
	}

	zero := 0
	f.networks["blue"] = network.Network{Ref: blue, DSCPPolicy: &qos.DSCPPolicy{Allowed: []qos.DSCPRange{{First: 0, Last: 5}}, Remark: &zero}}
	before := f.kernel.calls
	out = outcomeOf(t, f.agent.Sync(ctx), "a")
	if out.QoSErr == nil || !strings.Contains(out.QoSErr.Error(), "qos.dscp: 8 is not allowed by dscpPolicy (allowed 0-5)") {
		t.Errorf("a base marking 8 under a policy of 0-5: %v, want it named", out.QoSErr)
	}
	if f.kernel.calls != before {
		t.Errorf("%d kernel syncs for plans that cannot be applied", f.kernel.calls-before)
	}
}

func outcomeOf(t *testing.T, outs []Outcome, pod string) Outcome {
	t.Helper()
	for _, o := range outs {
		if o.Pod.Name == pod {
			return o
		}
	}
	t.Fatalf("no outcome for pod %s in %+v", pod, outs)
	return Outcome{}
}
