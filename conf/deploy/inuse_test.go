package deploy_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
)

// Only netclass-controller (and cluster administrators) take the finalizer netclass.dev/in-use
// off a Network or a PodNetwork; any other update, adding it included, is the policy's
// no concern.
func TestOnlyTheControllerRemovesTheInUseFinalizer(t *testing.T) {
	p := loadPolicy(t, "netclass-in-use-finalizer")
	tenant := &user.DefaultInfo{Name: "alice", Groups: []string{"system:authenticated"}}
	controller := &user.DefaultInfo{Name: "system:serviceaccount:netclass-system:netclass-controller"}
	admin := &user.DefaultInfo{Name: "root", Groups: []string{"system:masters", "system:authenticated"}}
	obj := func(gvr schema.GroupVersionResource, kind string, deleting bool, labels map[string]any, finalizers ...any) map[string]any {
		meta := map[string]any{"name": "red", "labels": labels}
		if len(finalizers) > 0 {
			meta["finalizers"] = finalizers
		}
		if gvr.Resource == "networks" {
			meta["namespace"] = "tenant"
		}
		if deleting {
			meta["deletionTimestamp"] = "2026-11-29T00:00:00Z"
		}
		return map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": kind, "metadata": meta, "spec": map[string]any{}}
	}
	const f = "netclass.dev/in-use"
	for _, kind := range []struct {
		gvr  schema.GroupVersionResource
		kind string
	}{{netsGVR, "Network"}, {podNetsGVR, "PodNetwork"}} {
		for _, tc := range []struct {
			name     string
			who      user.Info
			old, new map[string]any
			refused  bool
		}{
			{"tenant removes it", tenant, obj(kind.gvr, kind.kind, false, nil, f), obj(kind.gvr, kind.kind, false, nil), true},
			{"tenant removes it on deletion", tenant, obj(kind.gvr, kind.kind, true, nil, "x", f), obj(kind.gvr, kind.kind, true, nil, "x"), true},
			{"tenant edits labels", tenant, obj(kind.gvr, kind.kind, false, nil, f), obj(kind.gvr, kind.kind, false, map[string]any{"a": "b"}, f), false},
			{"tenant removes another finalizer", tenant, obj(kind.gvr, kind.kind, true, nil, "x", f), obj(kind.gvr, kind.kind, true, nil, f), false},
			{"tenant adds it", tenant, obj(kind.gvr, kind.kind, false, nil), obj(kind.gvr, kind.kind, false, nil, f), false},
			{"controller removes it", controller, obj(kind.gvr, kind.kind, true, nil, f), obj(kind.gvr, kind.kind, true, nil), false},
			{"administrator removes it", admin, obj(kind.gvr, kind.kind, true, nil, f), obj(kind.gvr, kind.kind, true, nil), false},
		} {
			t.Run(kind.kind+"/"+tc.name, func(t *testing.T) {
				old, upd := toUnstructured(t, tc.old), toUnstructured(t, tc.new)
				refused, msg := p.reviewAs(t, tc.who, "", admission.Update, kind.gvr, old.GroupVersionKind(), upd, old)
				if refused != tc.refused {
					t.Errorf("refused = %v (%q), want %v", refused, msg, tc.refused)
				}
			})
		}
	}
}
