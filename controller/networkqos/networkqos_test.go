package networkqos_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/condition"
	"github.com/netclass-dev/netclass/controller/internal/harness"
	"github.com/netclass-dev/netclass/controller/networkqos"
)

func i32(v int32) *int32 { return &v }
func i64(v int64) *int64 { return &v }

func qos(name string, rules ...netclassv1alpha1.Rule) *netclassv1alpha1.NetworkQoS {
	return &netclassv1alpha1.NetworkQoS{
		ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: name, Generation: 1},
		Spec:       netclassv1alpha1.NetworkQoSSpec{Priority: 1, Egress: rules},
	}
}

func to(cidr string, except ...netclassv1alpha1.CIDR) netclassv1alpha1.Destination {
	return netclassv1alpha1.Destination{IPBlock: &netclassv1alpha1.IPBlock{CIDR: netclassv1alpha1.CIDR(cidr), Except: except}}
}

func TestValidate(t *testing.T) {
	badSel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpIn}}}
	for _, tc := range []struct {
		name  string
		q     *netclassv1alpha1.NetworkQoS
		wants []string
	}{
		{name: "valid", q: qos("ok", netclassv1alpha1.Rule{DSCP: 20,
			Classifier: &netclassv1alpha1.Classifier{
				To:    []netclassv1alpha1.Destination{{PodSelector: &metav1.LabelSelector{}}, to("0.0.0.0/0", "10.0.0.0/8")},
				Ports: []netclassv1alpha1.Port{{Protocol: "TCP", Port: i32(443)}},
			},
			Bandwidth: &netclassv1alpha1.Bandwidth{Rate: i64(10000), Burst: i64(1000)}})},
		{name: "an empty bandwidth limits nothing, as on the nodes", q: qos("ok", netclassv1alpha1.Rule{DSCP: 20, Bandwidth: &netclassv1alpha1.Bandwidth{}})},
		{
			name: "every problem named",
			q: func() *netclassv1alpha1.NetworkQoS {
				q := qos("bad",
					netclassv1alpha1.Rule{DSCP: 1, Classifier: &netclassv1alpha1.Classifier{To: []netclassv1alpha1.Destination{
						{PodSelector: badSel}, to("10.0.0.0/8", "2001:db8::/64"),
					}}},
					netclassv1alpha1.Rule{DSCP: 2, Bandwidth: &netclassv1alpha1.Bandwidth{Burst: i64(5)}},
				)
				q.Spec.PodSelector = *badSel
				q.Spec.NetworkSelectors = netclassv1alpha1.NetworkSelectors{{
					NetworkSelectionType: netclassv1alpha1.NetworkAttachmentDefinitions,
					NetworkAttachmentDefinitionSelector: &netclassv1alpha1.NetworkAttachmentDefinitionSelector{
						NamespaceSelector: *badSel, NetworkSelector: *badSel,
					},
				}}
				return q
			}(),
			wants: []string{"spec.podSelector", "spec.networkSelectors[0].networkAttachmentDefinitionSelector.namespaceSelector",
				"spec.networkSelectors[0].networkAttachmentDefinitionSelector.networkSelector", "spec.egress[0].classifier.to[0].podSelector", "spec.egress[0].classifier.to[1].ipBlock.except[0]", "spec.egress[1].bandwidth.rate"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := networkqos.Validate(tc.q)
			if len(tc.wants) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
	if got := networkqos.Precedence(2, 19); got != 59 {
		t.Errorf("precedence %d", got)
	}
}

func TestReconcile(t *testing.T) {
	valid := qos("valid", netclassv1alpha1.Rule{DSCP: 20})
	valid.Spec.NetworkSelectors = netclassv1alpha1.NetworkSelectors{{
		NetworkSelectionType: netclassv1alpha1.PodNetworks,
		PodNetworkSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "paid"}},
	}}
	applied := qos("applied", netclassv1alpha1.Rule{DSCP: 20})
	applied.Status.Nodes = []netclassv1alpha1.NetworkQoSNodeStatus{{Node: "n1", Attachments: 3, Reason: "Applied"}, {Node: "n2", Attachments: 1, Reason: "Applied"}}
	failed := qos("failed", netclassv1alpha1.Rule{DSCP: 20})
	failed.Spec.NetworkSelectors = netclassv1alpha1.NetworkSelectors{{NetworkSelectionType: netclassv1alpha1.DefaultNetwork},
		{NetworkSelectionType: netclassv1alpha1.Networks, NetworkSelector: &metav1.LabelSelector{}}}
	failed.Status.Nodes = []netclassv1alpha1.NetworkQoSNodeStatus{{Node: "n1", Attachments: 3, Reason: "Applied"},
		{Node: "n2", Reason: "ApplyFailed", Message: "pod games/web interface net1: netns vanished"}}
	leftOut := qos("leftout", netclassv1alpha1.Rule{DSCP: 20})
	leftOut.Status.Nodes = []netclassv1alpha1.NetworkQoSNodeStatus{{Node: "n1", Attachments: 2, Reason: "Applied",
		Message: "pod games/web interface eth0: spec.egress[0]: its destination selectors select more than the 4000 addresses"}}
	invalid := qos("invalid", netclassv1alpha1.Rule{DSCP: 1, Classifier: &netclassv1alpha1.Classifier{To: []netclassv1alpha1.Destination{to("10.0.0.0/8", "11.0.0.0/16")}}})
	objs := []runtime.Object{valid, applied, failed, leftOut, invalid,
		&multinetworkv1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: "p1", Labels: map[string]string{"tier": "paid"}}, Spec: multinetworkv1.PodNetworkSpec{Provider: "netclass.dev"}},
		&multinetworkv1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: "p2", Labels: map[string]string{"tier": "paid"}}, Spec: multinetworkv1.PodNetworkSpec{Provider: "other.example.com/x"}},
		&multinetworkv1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: "p3"}, Spec: multinetworkv1.PodNetworkSpec{Provider: "netclass.dev"}},
		&netclassv1alpha1.Network{ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: "n1"}},
		&netclassv1alpha1.Network{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "n2"}},
	}
	env := harness.New(t, nil, objs)
	c, err := networkqos.New(env.NC, env.NCInf, env.Recorder)
	if err != nil {
		t.Fatal(err)
	}
	env.Start(t, c.HasSynced)
	for _, tc := range []struct {
		name, accepted, ready, msgHas, status string
	}{
		{"valid", "Accepted", "Pending", "1 PodNetwork(s) and 0 Network(s)", "Pending"},
		{"applied", "Accepted", "Applied", "selects the default network (the pods' primary interface): no networkSelectors", "Applied"},
		{"failed", "Accepted", "ApplyFailed", "the default network (the pods' primary interface), 0 PodNetwork(s) and 1 Network(s)", "ApplyFailed"},
		{"leftout", "Accepted", "Applied", "selects the default network", "Applied"},
		{"invalid", "InvalidConfig", "InvalidConfig", "except[0]", "InvalidConfig"},
	} {
		if _, err := c.Reconcile(env.Ctx, "games/"+tc.name); err != nil {
			t.Fatal(err)
		}
		q, err := env.NC.NetclassV1alpha1().NetworkQoSes("games").Get(env.Ctx, tc.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		acc := condition.Get(q.Status.Conditions, "Accepted")
		ready := condition.Get(q.Status.Conditions, "Ready")
		if acc == nil || acc.Reason != tc.accepted || !strings.Contains(acc.Message, tc.msgHas) || ready == nil || ready.Reason != tc.ready || q.Status.Status != tc.status {
			t.Errorf("%s: Accepted %+v, Ready %+v, status %q", tc.name, acc, ready, q.Status.Status)
		}
		if tc.name == "failed" && (ready == nil || !strings.Contains(ready.Message, "node n2: pod games/web interface net1: netns vanished")) {
			t.Errorf("failed: Ready %+v does not name the node, the pod and the error", ready)
		}
		if tc.name == "leftout" && (ready == nil || ready.Message != "enforced on 2 attachments on 1 nodes; some rules left out: node n1: "+leftOut.Status.Nodes[0].Message) {
			t.Errorf("leftout: Ready %+v does not name the rules a node left out", ready)
		}
		if tc.name == "applied" && (ready == nil || ready.Message != "enforced on 4 attachments on 2 nodes") {
			t.Errorf("applied: Ready %+v does not sum the nodes up", ready)
		}
	}
	if ev := strings.Join(env.Events(), "\n"); !strings.Contains(ev, "Warning InvalidConfig") {
		t.Errorf("events lack Warning InvalidConfig:\n%s", ev)
	}
}
