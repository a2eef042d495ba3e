package deploy_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
)

// A node's netclass-dra writes its own entry of a NetworkQoS status and
// nothing else of it: not another node's entry, not the controller's
// summary, and nothing at all without a node in its token.
func TestDaemonWritesOnlyItsNodesNetworkQoSEntry(t *testing.T) {
	p := loadPolicy(t, "netclass-dra-own-node")
	gvr := schema.GroupVersionResource{Group: "netclass.dev", Version: "v1alpha1", Resource: "networkqoses"}
	gvk := gvr.GroupVersion().WithKind("NetworkQoS")
	dra := func(node string) user.Info {
		u := &user.DefaultInfo{Name: "system:serviceaccount:netclass-system:netclass-dra", Extra: map[string][]string{}}
		if node != "" {
			u.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {node}}
		}
		return u
	}
	entry := func(node string, n int) map[string]any {
		return map[string]any{"node": node, "attachments": n, "reason": "Applied", "lastTransitionTime": "2026-01-01T00:00:00Z"}
	}
	qos := func(status string, nodes ...map[string]any) map[string]any {
		ns := make([]any, len(nodes))
		for i, n := range nodes {
			ns[i] = n
		}
		return map[string]any{"apiVersion": "netclass.dev/v1alpha1", "kind": "NetworkQoS",
			"metadata": map[string]any{"namespace": "t1", "name": "web"}, "status": map[string]any{"status": status, "nodes": ns}}
	}
	old := toUnstructured(t, qos("Applied", entry("n1", 1), entry("n2", 1)))
	for _, tc := range []struct {
		name   string
		who    user.Info
		new    map[string]any
		denied bool
	}{
		{"its own entry", dra("n1"), qos("Applied", entry("n1", 3), entry("n2", 1)), false},
		{"its own entry removed", dra("n1"), qos("Applied", entry("n2", 1)), false},
		{"another node's entry", dra("n1"), qos("Applied", entry("n1", 1), entry("n2", 7)), true},
		{"another node's entry removed", dra("n1"), qos("Applied", entry("n1", 1)), true},
		{"the summary", dra("n1"), qos("Pending", entry("n1", 1), entry("n2", 1)), true},
		{"no node in the token", dra(""), qos("Applied", entry("n1", 3), entry("n2", 1)), true},
		{"the controller", &user.DefaultInfo{Name: "system:serviceaccount:netclass-system:netclass-controller"},
			qos("Pending", entry("n1", 1), entry("n2", 7)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			denied, msg := p.reviewAs(t, tc.who, "status", admission.Update, gvr, gvk, toUnstructured(t, tc.new), old)
			if denied != tc.denied {
				t.Fatalf("denied %v (%s), want %v", denied, msg, tc.denied)
			}
			if denied && !strings.Contains(msg, "NetworkQoS status entries of its own node") {
				t.Errorf("message %q", msg)
			}
		})
	}
}
