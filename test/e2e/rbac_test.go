//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// as is a client acting as one of conf/deploy's service accounts.
func as(t *testing.T, e *harness.Env, sa string) kubernetes.Interface {
	t.Helper()
	rc := rest.CopyConfig(e.Rest)
	rc.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:netclass-system:" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:netclass-system", "system:authenticated"}}
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// netclass-controller may set and remove its own node labels and change
// nothing else of a node (the ValidatingAdmissionPolicy of conf/deploy);
// netclass-dra cannot touch the controller's leader Lease.
func TestDeployedPrivileges(t *testing.T) {
	e := harness.Shared(t)
	ctx := testbed.Context(t, 2*time.Minute)
	applied, err := e.ApplyFile(ctx, "conf/deploy/10-controller-rbac.yaml", nil)
	t.Cleanup(func() {
		if err := harness.DeleteApplied(applied); err != nil {
			t.Errorf("remove the controller's RBAC: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctl := as(t, e, "netclass-controller")
	label := "clusternetwork.netclass.dev/e2e-" + harness.Unique(6)
	patch := func(body string) error {
		_, err := ctl.CoreV1().Nodes().Patch(ctx, e.Node, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	// The policy takes effect once the API server loaded it: wait for its
	// first refusal (each try is a real change; what got through goes at the end).
	t.Cleanup(func() {
		e.Kube.CoreV1().Nodes().Patch(context.Background(), e.Node, types.MergePatchType, []byte(`{"metadata":{"labels":{"e2e-evil":null}}}`), metav1.PatchOptions{})
	})
	try := 0
	testbed.Poll(t, ctx, 200*time.Millisecond, "the node label policy in force", func(context.Context) (bool, string, error) {
		try++
		err := patch(fmt.Sprintf(`{"metadata":{"labels":{"e2e-evil":"%d"}}}`, try))
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), errString(err), nil
	})
	if err := patch(`{"metadata":{"labels":{"` + label + `":"true"}}}`); err != nil {
		t.Fatalf("the controller cannot set its own label: %v", err)
	}
	t.Cleanup(func() {
		e.Kube.CoreV1().Nodes().Patch(context.Background(), e.Node, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+label+`":null}}}`), metav1.PatchOptions{})
	})
	for name, body := range map[string]string{
		"a foreign label":             `{"metadata":{"labels":{"e2e-evil":"x"}}}`,
		"its label to another value":  `{"metadata":{"labels":{"` + label + `":"yes"}}}`,
		"an annotation":               `{"metadata":{"annotations":{"e2e-evil":"1"}}}`,
		"the spec":                    `{"spec":{"unschedulable":true}}`,
		"removing the hostname label": `{"metadata":{"labels":{"kubernetes.io/hostname":null}}}`,
	} {
		if err := patch(body); !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
			t.Errorf("the controller may change %s: %v", name, err)
		}
	}
	if err := patch(`{"metadata":{"labels":{"` + label + `":null}}}`); err != nil {
		t.Fatalf("the controller cannot remove its own label: %v", err)
	}
	// The node index: set once (by the controller the harness runs), never changed.
	var index string
	testbed.Poll(t, ctx, 100*time.Millisecond, "the node's index", func(ctx context.Context) (bool, string, error) {
		n, err := e.Kube.CoreV1().Nodes().Get(ctx, e.Node, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		var ok bool
		index, ok = n.Annotations[ncv1.AnnotationNodeIndex]
		return ok, fmt.Sprint(n.Annotations), nil
	})
	for name, body := range map[string]string{
		"its node index to another value": `{"metadata":{"annotations":{"` + ncv1.AnnotationNodeIndex + `":"9` + index + `"}}}`,
		"removing its node index":         `{"metadata":{"annotations":{"` + ncv1.AnnotationNodeIndex + `":null}}}`,
	} {
		if err := patch(body); !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
			t.Errorf("the controller may change %s: %v", name, err)
		}
	}
	if err := patch(`{"metadata":{"annotations":{"` + ncv1.AnnotationNodeIndex + `":"` + index + `"}}}`); err != nil {
		t.Errorf("the controller cannot write the node index it set: %v", err)
	}

	dra := as(t, e, "netclass-dra")
	if _, err := dra.CoordinationV1().Leases("netclass-system").Get(ctx, "netclass-controller", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("netclass-dra may read the controller's Lease: %v", err)
	}
	if err := dra.CoordinationV1().Leases("netclass-system").Delete(ctx, "netclass-controller", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("netclass-dra may delete the controller's Lease: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "accepted"
	}
	return err.Error()
}
