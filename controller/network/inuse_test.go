package network_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/netclass-dev/netclass/api/contract"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/condition"
	"github.com/netclass-dev/netclass/controller/internal/harness"
	"github.com/netclass-dev/netclass/controller/network"
)

// A deleted Network keeps its finalizer, and its VLAN ID, while a claim of its namespace is
// allocated its device: another namespace's Network of that ID stays in conflict. A claim
// of another namespace (which netclass-dra would refuse) holds nothing. Once the claim is
// deallocated the finalizer goes.
func TestDeletedNetworkWaitsForItsClaims(t *testing.T) {
	red := net("red", "trunk", i32(100), nil)
	red.Finalizers = []string{contract.FinalizerInUse}
	red.DeletionTimestamp = &metav1.Time{Time: time.Unix(2000, 0)}
	newcomer := net("blue", "trunk", i32(100), nil)
	newcomer.Namespace, newcomer.CreationTimestamp = "other", metav1.NewTime(time.Unix(3000, 0))
	dev := harness.Device("red-dev", map[string]string{contract.AttributeStdPodNetwork: "red", contract.AttributeStdPodNetworkNamespace: "tenant"})
	user := harness.Claim("user", []harness.Result{harness.Alloc(contract.DriverName, "node-a", "red-dev")}, nil)
	user.Namespace = "tenant"
	stranger := harness.Claim("stranger", []harness.Result{harness.Alloc(contract.DriverName, "node-a", "red-dev")}, nil)
	env := harness.New(t, []runtime.Object{harness.Slice(contract.DriverName, "node-a", dev), user, stranger},
		[]runtime.Object{vlanCN(), red, newcomer})
	c, err := network.New(env.NC, env.NCInf, env.KubeInf, env.Recorder)
	if err != nil {
		t.Fatal(err)
	}
	env.Start(t, c.HasSynced)
	for _, key := range []string{"tenant/red", "other/blue"} {
		if _, err := c.Reconcile(env.Ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	got := getNet(t, env, "tenant", "red")
	inUse := condition.Get(got.Status.Conditions, netclassv1alpha1.ConditionInUse)
	if !slices.Contains(got.Finalizers, contract.FinalizerInUse) || inUse == nil || inUse.Status != metav1.ConditionTrue ||
		!strings.Contains(inUse.Message, "tenant/user") || strings.Contains(inUse.Message, "stranger") {
		t.Fatalf("deleted network in use: finalizers %v, InUse %+v", got.Finalizers, inUse)
	}
	if b := getNet(t, env, "other", "blue"); condition.Get(b.Status.Conditions, "Ready").Reason != netclassv1alpha1.ReasonSegmentConflict {
		t.Errorf("newcomer on the deleted network's VLAN ID: %+v", b.Status.Conditions)
	}
	if ev := env.Events(); !slices.ContainsFunc(ev, func(e string) bool { return strings.Contains(e, network.EventDeletionBlocked) }) {
		t.Errorf("events %v lack %s", ev, network.EventDeletionBlocked)
	}

	env.Deallocate(t, user)
	nets := env.NCInf.Netclass().V1alpha1().Networks().Lister()
	env.Resync(t, "red in use", func() bool {
		n, err := nets.Networks("tenant").Get("red")
		return err == nil && condition.IsTrue(n.Status.Conditions, netclassv1alpha1.ConditionInUse)
	})
	if _, err := c.Reconcile(env.Ctx, "tenant/red"); err != nil {
		t.Fatal(err)
	}
	if got := getNet(t, env, "tenant", "red"); slices.Contains(got.Finalizers, contract.FinalizerInUse) {
		t.Errorf("finalizer kept after the last claim went: %v", got.Finalizers)
	}
}

func getNet(t *testing.T, env *harness.Env, ns, name string) *netclassv1alpha1.Network {
	t.Helper()
	n, err := env.NC.NetclassV1alpha1().Networks(ns).Get(env.Ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// fakeNADs answers for the generated NADs of networks.
type fakeNADs struct {
	known bool
	nads  map[string][]string
}

func (f *fakeNADs) Of(network string) ([]string, bool) { return f.nads[network], f.known }
func (f *fakeNADs) Notify(func([]string))              {}

// A deleted Network no claim uses waits for its generated NAD (a pod
// attached through it still names it), and for the NADs to be listed at all.
func TestDeletedNetworkWaitsForItsNAD(t *testing.T) {
	for _, tc := range []struct {
		name string
		nads *fakeNADs
		kept string // "": the finalizer goes
	}{
		{"its NAD is there", &fakeNADs{known: true, nads: map[string][]string{"tenant/red": {"tenant/red"}}}, "NetworkAttachmentDefinition tenant/red"},
		{"not listed yet", &fakeNADs{}, "NetworkAttachmentDefinitions (not listed yet)"},
		{"no NAD", &fakeNADs{known: true, nads: map[string][]string{"tenant/other": {"tenant/other"}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			red := net("red", "trunk", i32(100), nil)
			red.Finalizers = []string{contract.FinalizerInUse}
			red.DeletionTimestamp = &metav1.Time{Time: time.Unix(2000, 0)}
			env := harness.New(t, nil, []runtime.Object{vlanCN(), red})
			c, err := network.New(env.NC, env.NCInf, env.KubeInf, env.Recorder)
			if err != nil {
				t.Fatal(err)
			}
			c.WaitForNADs(tc.nads)
			env.Start(t, c.HasSynced)
			if _, err := c.Reconcile(env.Ctx, "tenant/red"); err != nil {
				t.Fatal(err)
			}
			n, err := env.NC.NetclassV1alpha1().Networks("tenant").Get(env.Ctx, "red", metav1.GetOptions{})
			if tc.kept == "" {
				if err == nil && slices.Contains(n.Finalizers, contract.FinalizerInUse) {
					t.Errorf("finalizer kept: %v", n.Status.Conditions)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			inUse := condition.Get(n.Status.Conditions, netclassv1alpha1.ConditionInUse)
			if !slices.Contains(n.Finalizers, contract.FinalizerInUse) || inUse == nil || !strings.Contains(inUse.Message, tc.kept) {
				t.Errorf("finalizers %v, InUse %+v; want kept for %q", n.Finalizers, inUse, tc.kept)
			}
		})
	}
}
