package clusternetwork_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/clusternetwork"
	"github.com/netclass-dev/netclass/controller/condition"
	"github.com/netclass-dev/netclass/controller/internal/harness"
)

func node(name string, lbls map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
}

func vxlanCN(name string, sel *metav1.LabelSelector, opts *netclassv1alpha1.VXLANOptions) *netclassv1alpha1.ClusterNetwork {
	return &netclassv1alpha1.ClusterNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: 4},
		Spec: netclassv1alpha1.ClusterNetworkSpec{
			Type: netclassv1alpha1.NetworkTypeVXLAN, NodeSelector: sel,
			DefaultOptions: &netclassv1alpha1.Options{VXLAN: opts},
		},
	}
}

func nnReady(cn *netclassv1alpha1.ClusterNetwork, nodeName string, status metav1.ConditionStatus, reason, local string) *netclassv1alpha1.NodeNetwork {
	nn := clusternetwork.NewNodeNetwork(cn, nodeName, *cn.Spec.DefaultOptions)
	nn.Status.LocalAddress = netclassv1alpha1.IPAddress(local)
	if status != "" {
		nn.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: status, Reason: reason, Message: "m"}}
	}
	return nn
}

func TestNodeNetworkName(t *testing.T) {
	if got := clusternetwork.NodeNetworkName("trunk", "worker-1"); got != "trunk.worker-1" {
		t.Errorf("short: %s", got)
	}
	long := strings.Repeat("n", 250)
	got := clusternetwork.NodeNetworkName("trunk", long)
	if len(got) > 253 || !strings.HasPrefix(got, "trunk.nnn") {
		t.Errorf("long: %q (%d)", got, len(got))
	}
	if other := clusternetwork.NodeNetworkName("trunk", long[:249]+"m"); other == got {
		t.Errorf("two long node names give the same NodeNetwork name %s", got)
	}
}

func TestSelectedNodesAndOptions(t *testing.T) {
	cn := vxlanCN("overlay", &metav1.LabelSelector{MatchLabels: map[string]string{"net": "yes"}}, &netclassv1alpha1.VXLANOptions{Master: "eth0"})
	sel, err := clusternetwork.NodeSelector(cn)
	if err != nil {
		t.Fatal(err)
	}
	nodes := clusternetwork.SelectedNodes([]*corev1.Node{
		node("c", map[string]string{"net": "yes"}), node("a", map[string]string{"net": "yes"}), node("b", nil),
	}, sel)
	if strings.Join(nodes, ",") != "a,c" {
		t.Fatalf("selected %v", nodes)
	}
	existing := map[string]*netclassv1alpha1.NodeNetwork{
		"a": nnReady(cn, "a", metav1.ConditionTrue, "Ready", "192.0.2.1"),
		"c": nnReady(cn, "c", metav1.ConditionFalse, "MasterNotFound", "192.0.2.3"),
	}
	opts := clusternetwork.NodeOptions(cn, nodes, existing)
	if got := opts["a"].VXLAN.Remotes; len(got) != 0 {
		t.Errorf("remotes of a include c, whose NodeNetwork is not Ready: %v", got)
	}
	if got := opts["c"].VXLAN.Remotes; len(got) != 1 || got[0] != "192.0.2.1" || opts["c"].VXLAN.Master != "eth0" {
		t.Errorf("options of c: %+v", opts["c"].VXLAN)
	}
	if cn.Spec.DefaultOptions.VXLAN.Remotes != nil {
		t.Error("NodeOptions changed the ClusterNetwork's defaults")
	}
	// A multicast group or explicit remotes are kept as they are.
	cn.Spec.DefaultOptions.VXLAN.Group = "239.1.1.1"
	if got := clusternetwork.NodeOptions(cn, nodes, existing)["a"].VXLAN; got.Remotes != nil || got.Group != "239.1.1.1" {
		t.Errorf("with group: %+v", got)
	}
	// Everything left to the nodes: the type's member is there, empty.
	bare := vxlanCN("bare", nil, nil)
	bare.Spec.DefaultOptions = nil
	if got := clusternetwork.NodeOptions(bare, []string{"a"}, nil)["a"]; got.VXLAN == nil || got.VLAN != nil {
		t.Errorf("options of a ClusterNetwork without defaultOptions: %+v", got)
	}
	bad := vxlanCN("bad", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Sometimes"}}}, nil)
	if _, err := clusternetwork.NodeSelector(bad); err == nil || !strings.Contains(err.Error(), "spec.nodeSelector") {
		t.Errorf("bad selector: %v", err)
	}
}

func TestPlan(t *testing.T) {
	cn := vxlanCN("overlay", nil, &netclassv1alpha1.VXLANOptions{Master: "eth0"})
	other := vxlanCN("overlay", nil, &netclassv1alpha1.VXLANOptions{Master: "eth0"})
	other.UID = "uid-of-an-older-overlay"
	keep := nnReady(cn, "a", "", "", "")
	stale := nnReady(cn, "b", "", "", "")
	stale.Spec.Options.VXLAN = &netclassv1alpha1.VXLANOptions{Master: "eth9"}
	gone := nnReady(cn, "old", "", "", "")
	orphan := nnReady(other, "c", "", "", "")
	opts := map[string]netclassv1alpha1.Options{"a": *cn.Spec.DefaultOptions, "b": *cn.Spec.DefaultOptions, "c": *cn.Spec.DefaultOptions, "d": *cn.Spec.DefaultOptions}
	p := clusternetwork.PlanNodeNetworks(cn, opts, []*netclassv1alpha1.NodeNetwork{keep, stale, gone, orphan})
	names := func(nns []*netclassv1alpha1.NodeNetwork) string {
		var s []string
		for _, n := range nns {
			s = append(s, n.Spec.NodeName)
		}
		return strings.Join(s, ",")
	}
	if got := names(p.Create); got != "c,d" {
		t.Errorf("create %s", got)
	}
	if got := names(p.Update); got != "b" || p.Update[0].Spec.Options.VXLAN.Master != "eth0" {
		t.Errorf("update %s", got)
	}
	if got := names(p.Delete); got != "c,old" {
		t.Errorf("delete %s", got)
	}
	for _, nn := range p.Create {
		if !metav1.IsControlledBy(nn, cn) || nn.Labels[netclassv1alpha1.LabelClusterNetwork] != "overlay" {
			t.Errorf("created %s is not owned and labelled: %+v", nn.Name, nn.ObjectMeta)
		}
	}
}

func TestReadyCondition(t *testing.T) {
	cn := vxlanCN("overlay", nil, &netclassv1alpha1.VXLANOptions{Master: "eth0"})
	for _, tc := range []struct {
		name   string
		nodes  []string
		nns    map[string]*netclassv1alpha1.NodeNetwork
		status metav1.ConditionStatus
		reason string
		ready  int32
	}{
		{"no nodes", nil, nil, metav1.ConditionFalse, "NoReadyNodes", 0},
		{"nobody reported", []string{"a"}, map[string]*netclassv1alpha1.NodeNetwork{"a": nnReady(cn, "a", "", "", "")}, metav1.ConditionUnknown, "Pending", 0},
		{"one ready", []string{"a", "b"}, map[string]*netclassv1alpha1.NodeNetwork{
			"a": nnReady(cn, "a", metav1.ConditionTrue, "Ready", ""), "b": nnReady(cn, "b", metav1.ConditionFalse, "MasterNotFound", ""),
		}, metav1.ConditionTrue, "Ready", 1},
		{"all failed", []string{"b"}, map[string]*netclassv1alpha1.NodeNetwork{"b": nnReady(cn, "b", metav1.ConditionFalse, "MasterNotFound", "")}, metav1.ConditionFalse, "NoReadyNodes", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := clusternetwork.Summarize(tc.nodes, tc.nns)
			c := clusternetwork.ReadyCondition(s)
			if c.Status != tc.status || c.Reason != tc.reason || s.ReadyNodes != tc.ready || s.Nodes != int32(len(tc.nodes)) {
				t.Errorf("got %s/%s %q, ready %d of %d", c.Status, c.Reason, c.Message, s.ReadyNodes, s.Nodes)
			}
		})
	}
}

func TestReconcile(t *testing.T) {
	cn := vxlanCN("overlay", &metav1.LabelSelector{MatchLabels: map[string]string{"net": "yes"}}, &netclassv1alpha1.VXLANOptions{Master: "eth0"})
	labelKey := clusternetwork.NodeLabel("overlay")
	nodes := []runtime.Object{
		node("a", map[string]string{"net": "yes"}),
		node("b", map[string]string{"net": "yes"}),
		node("c", map[string]string{labelKey: "true"}), // labelled earlier, no longer selected
	}
	readyA := nnReady(cn, "a", metav1.ConditionTrue, "Ready", "192.0.2.1")
	env := harness.New(t, nodes, []runtime.Object{cn, readyA})
	c, err := clusternetwork.New(env.NC, env.Kube, env.NCInf, env.KubeInf, env.Recorder)
	if err != nil {
		t.Fatal(err)
	}
	env.Start(t, c.HasSynced)
	if _, err := c.Reconcile(env.Ctx, "overlay"); err != nil {
		t.Fatal(err)
	}
	nns, err := env.NC.NetclassV1alpha1().NodeNetworks().List(env.Ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nns.Items) != 2 {
		t.Fatalf("%d NodeNetworks, want 2", len(nns.Items))
	}
	for _, nn := range nns.Items {
		if nn.Spec.NodeName == "b" {
			if r := condition.Get(nn.Status.Conditions, "Ready"); r == nil || r.Reason != "NodeAgentMissing" {
				t.Errorf("new NodeNetwork of b: Ready = %+v", r)
			}
			if got := nn.Spec.Options.VXLAN.Remotes; len(got) != 1 || got[0] != "192.0.2.1" {
				t.Errorf("remotes of b = %v", got)
			}
		}
	}
	got, err := env.NC.NetclassV1alpha1().ClusterNetworks().Get(env.Ctx, "overlay", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Nodes != 2 || got.Status.ReadyNodes != 1 || got.Status.ObservedGeneration != 4 || !condition.IsTrue(got.Status.Conditions, "Ready") {
		t.Errorf("status %+v", got.Status)
	}
	want := map[string]bool{"a": true, "b": false, "c": false}
	for name, labelled := range want {
		n, err := env.Kube.CoreV1().Nodes().Get(env.Ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if (n.Labels[labelKey] == "true") != labelled {
			t.Errorf("node %s labels %v, want label %v", name, n.Labels, labelled)
		}
	}

	// The ClusterNetwork is deleted: its labels go (NodeNetworks go with the garbage collector).
	if err := env.NC.NetclassV1alpha1().ClusterNetworks().Delete(env.Ctx, "overlay", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lister := env.NCInf.Netclass().V1alpha1().ClusterNetworks().Lister()
	nodeLister := env.KubeInf.Core().V1().Nodes().Lister()
	env.Resync(t, "the deletion and the labels", func() bool {
		_, err := lister.Get("overlay")
		n, _ := nodeLister.Get("a")
		return err != nil && n != nil && n.Labels[labelKey] == "true"
	})
	if _, err := c.Reconcile(env.Ctx, "overlay"); err != nil {
		t.Fatal(err)
	}
	n, _ := env.Kube.CoreV1().Nodes().Get(env.Ctx, "a", metav1.GetOptions{})
	if _, ok := n.Labels[labelKey]; ok {
		t.Errorf("label kept after the ClusterNetwork went: %v", n.Labels)
	}
}
