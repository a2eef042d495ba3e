//go:build testbed

package controller_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/netclass-dev/netclass/api/contract"
	ncclient "github.com/netclass-dev/netclass/api/generated/clientset/versioned"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/condition"
	"github.com/netclass-dev/netclass/controller/network"
	"github.com/netclass-dev/netclass/test/testbed"
)

// testNetworkInUse plays netclass-dra for the Ready Network netName of e.ns (VNI vni): a
// claim allocated its device holds its deletion and its VNI, which a Network of another
// namespace then cannot take; a tenant allowed to update Networks cannot take the finalizer
// off (the ValidatingAdmissionPolicy of conf/deploy); the claim deallocated, the Network
// goes and the other namespace's Network gets the VNI.
func testNetworkInUse(t *testing.T, e *env, cfg *rest.Config, netName string, vni int32) {
	getNet := func(ns, name string) func(context.Context) (*netclassv1alpha1.Network, error) {
		return func(ctx context.Context) (*netclassv1alpha1.Network, error) {
			return e.nc.NetclassV1alpha1().Networks(ns).Get(ctx, name, metav1.GetOptions{})
		}
	}
	claims := e.kube.ResourceV1().ResourceClaims(e.ns)
	claim, err := claims.Create(e.ctx, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "on-" + netName},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "net", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "netclass"}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = claims.Delete(context.Background(), claim.Name, metav1.DeleteOptions{}) })
	data, _ := json.Marshal(contract.ClaimStatusData{PodNetwork: netName, PodNetworkNamespace: e.ns})
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "net", Driver: contract.DriverName, Pool: e.node, Device: "nctest-net"}}}}
	claim.Status.Devices = []resourceapi.AllocatedDeviceStatus{{Driver: contract.DriverName, Pool: e.node, Device: "nctest-net", Data: &runtime.RawExtension{Raw: data}}}
	if claim, err = claims.UpdateStatus(e.ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("write the claim's status as netclass-dra would: %v", err)
	}
	n := waitFor(t, e, "Network "+netName+" InUse", getNet(e.ns, netName), func(n *netclassv1alpha1.Network) (bool, string) {
		return condition.IsTrue(n.Status.Conditions, netclassv1alpha1.ConditionInUse), describe(n.Status.Conditions, netclassv1alpha1.ConditionInUse)
	})
	if !slices.Contains(n.Finalizers, contract.FinalizerInUse) {
		t.Fatalf("finalizers %v lack %s", n.Finalizers, contract.FinalizerInUse)
	}
	tenantCannotRemoveFinalizer(t, e, cfg, netName)

	if err := e.nc.NetclassV1alpha1().Networks(e.ns).Delete(e.ctx, netName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	key := e.ns + "/" + claim.Name
	waitFor(t, e, "Network "+netName+" deletion blocked", getNet(e.ns, netName), func(n *netclassv1alpha1.Network) (bool, string) {
		c := condition.Get(n.Status.Conditions, netclassv1alpha1.ConditionInUse)
		return n.DeletionTimestamp != nil && c != nil && strings.Contains(c.Message, key), describe(n.Status.Conditions, netclassv1alpha1.ConditionInUse)
	})
	waitEvent(t, e, e.ns, netName, network.EventDeletionBlocked)

	other := testbed.Namespace(t, e.kube)
	late := &netclassv1alpha1.Network{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: other},
		Spec: netclassv1alpha1.NetworkSpec{ClusterNetworkName: n.Spec.ClusterNetworkName, VNI: &vni}}
	if _, err := e.nc.NetclassV1alpha1().Networks(other).Create(e.ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, "the other namespace's Network in conflict", getNet(other, "late"), func(n *netclassv1alpha1.Network) (bool, string) {
		return hasCondition(n.Status.Conditions, "Ready", metav1.ConditionFalse, netclassv1alpha1.ReasonSegmentConflict, n.Generation), describe(n.Status.Conditions, "Ready")
	})

	claim.Status = resourceapi.ResourceClaimStatus{}
	if _, err := claims.UpdateStatus(e.ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, "Network "+netName+" deleted", func(ctx context.Context) (bool, error) {
		_, err := getNet(e.ns, netName)(ctx)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}, func(gone bool) (bool, string) { return gone, "still there" })
	waitFor(t, e, "the other namespace's Network Ready", getNet(other, "late"), func(n *netclassv1alpha1.Network) (bool, string) {
		return hasCondition(n.Status.Conditions, "Ready", metav1.ConditionTrue, "Ready", n.Generation), describe(n.Status.Conditions, "Ready")
	})
}

// tenantCannotRemoveFinalizer: a user whose Role lets it update the namespace's Networks has
// the removal of the finalizer refused (a dry run: nothing is changed whatever the answer;
// the policy, applied with the controller's RBAC, may take a moment to be in force).
func tenantCannotRemoveFinalizer(t *testing.T, e *env, cfg *rest.Config, netName string) {
	const tenant = "nctest-tenant"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "nctest-networks", Namespace: e.ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"netclass.dev"}, Resources: []string{"networks"}, Verbs: []string{"get", "update"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "nctest-networks", Namespace: e.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: tenant}}}
	if _, err := e.kube.RbacV1().Roles(e.ns).Create(e.ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.RbacV1().RoleBindings(e.ns).Create(e.ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: tenant, Groups: []string{"system:authenticated"}}
	nets := ncclient.NewForConfigOrDie(as).NetclassV1alpha1().Networks(e.ns)
	waitFor(t, e, "the tenant's removal of the finalizer refused", func(ctx context.Context) (string, error) {
		n, err := nets.Get(ctx, netName, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		n.Finalizers = slices.DeleteFunc(n.Finalizers, func(f string) bool { return f == contract.FinalizerInUse })
		_, err = nets.Update(ctx, n, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return "admitted", nil
		}
		return err.Error(), nil
	}, func(answer string) (bool, string) {
		return strings.Contains(answer, "only netclass-controller removes the finalizer"), answer
	})
}
