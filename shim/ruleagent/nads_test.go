package ruleagent

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/render"
)

// fakeNADs describes the NADs of its map ("namespace/name"); generated
// names the network whose generated NAD it describes ("" none).
type fakeNADs struct {
	nads      map[string]*render.NAD
	generated string
}

func (f fakeNADs) NAD(ns, name string) *render.NAD { return f.nads[ns+"/"+name] }

func (f fakeNADs) Generated(ns string, net network.Network) *render.NAD {
	if net.Ref.Name != f.generated {
		return nil
	}
	return f.nads[ns+"/"+net.Ref.Name]
}

// nadQoS is seed 003's NAD selection: NADs labelled tier=storage in
// namespaces labelled team=t1, for the pods app=web.
func nadQoS(dscp int32) *ncv1.NetworkQoS {
	sel := &ncv1.NetworkAttachmentDefinitionSelector{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "t1"}},
		NetworkSelector:   metav1.LabelSelector{MatchLabels: map[string]string{"tier": "storage"}}}
	return &ncv1.NetworkQoS{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "storage"},
		Spec: ncv1.NetworkQoSSpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			NetworkSelectors: ncv1.NetworkSelectors{{NetworkSelectionType: ncv1.NetworkAttachmentDefinitions, NetworkAttachmentDefinitionSelector: sel}},
			Egress:           []ncv1.Rule{{DSCP: dscp}}}}
}

// A NetworkQoS selecting NADs by label reaches a Multus attachment made
// from such a NAD, and a claim attachment whose network's generated NAD is
// one; not a claim attachment without one, nor a NAD whose labels or
// namespace do not match.
func TestNADSelectorsReachForeignAndGeneratedNADs(t *testing.T) {
	storage := func(ns, name string, nsLabels map[string]string) *render.NAD {
		return &render.NAD{Namespace: ns, Name: name, Labels: map[string]string{"tier": "storage"}, NamespaceLabels: nsLabels}
	}
	team := map[string]string{"team": "t1"}
	for _, c := range []struct {
		name             string
		nads             fakeNADs
		foreign, claimed bool
	}{
		{"the Multus NAD and the claim's generated NAD match", fakeNADs{map[string]*render.NAD{"t1/nad": storage("t1", "nad", team), "t1/blue": storage("t1", "blue", team)}, "blue"}, true, true},
		{"no generated NAD for the claim's network", fakeNADs{map[string]*render.NAD{"t1/nad": storage("t1", "nad", team), "t1/blue": storage("t1", "blue", team)}, ""}, true, false},
		{"the NAD's namespace does not match", fakeNADs{map[string]*render.NAD{"t1/nad": storage("t1", "nad", nil)}, ""}, false, false},
		{"the NAD is not known", fakeNADs{}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture()
			f.agent.Foreign = NewForeign(func() []ForeignAttachment { return []ForeignAttachment{multusNet2("a")} }, func(string) error { return nil })
			f.agent.NADs = c.nads
			f.policies["t1"] = []*ncv1.NetworkQoS{nadQoS(34)}
			if err := Errors(f.agent.Sync(context.Background())); err != nil {
				t.Fatal(err)
			}
			_, synced := f.kernel.plans["/ns/a/net2"]
			if synced != c.foreign || synced && !slices.Equal(rulesOf(t, f.kernel, "/ns/a/net2"), []uint8{34}) {
				t.Errorf("a's Multus net2: synced %v (rules %+v), want the NAD selector's rule: %v", synced, f.kernel.plans["/ns/a/net2"], c.foreign)
			}
			if got := slices.Contains(rulesOf(t, f.kernel, "/ns/a/net1"), 34); got != c.claimed {
				t.Errorf("a's claim net1 has the NAD selector's rule: %v, want %v", got, c.claimed)
			}
		})
	}
}
