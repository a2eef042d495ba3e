package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/multus"
	"github.com/netclass-dev/netclass/shim/network"
)

type fakeAPI struct {
	namespaces []corev1.Namespace
	pods       []corev1.Pod
	claims     []resourceapi.ResourceClaim
}

func (f fakeAPI) Namespaces(_ context.Context, sel labels.Selector) ([]corev1.Namespace, error) {
	var out []corev1.Namespace
	for _, n := range f.namespaces {
		if sel.Matches(labels.Set(n.Labels)) {
			out = append(out, n)
		}
	}
	return out, nil
}

func (f fakeAPI) Pods(_ context.Context, ns string, sel labels.Selector) ([]corev1.Pod, error) {
	var out []corev1.Pod
	for _, p := range f.pods {
		if p.Namespace == ns && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f fakeAPI) Claims(_ context.Context, ns string) ([]resourceapi.ResourceClaim, error) {
	var out []resourceapi.ResourceClaim
	for _, c := range f.claims {
		if c.Namespace == ns {
			out = append(out, c)
		}
	}
	return out, nil
}

func pod(ns, name, app string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), Labels: map[string]string{"app": app}}}
}

// claim of a pod with an entry on network (class/ns/name) at ip.
func claim(p corev1.Pod, class, netNS, net, ip string) resourceapi.ResourceClaim {
	data := fmt.Sprintf(`{"podNetwork":%q,"podNetworkNamespace":%q,"networkClass":%q}`, net, netNS, class)
	return resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name + "-" + net},
		Status: resourceapi.ResourceClaimStatus{
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}},
			Devices: []resourceapi.AllocatedDeviceStatus{{Driver: contract.DriverName, Pool: "n", Device: "d",
				Data: &runtime.RawExtension{Raw: []byte(data)}, NetworkData: &resourceapi.NetworkDeviceData{InterfaceName: "net1", IPs: []string{ip}}}}}}
}

func TestAddresses(t *testing.T) {
	db1, db2, web, other := pod("games", "db1", "db"), pod("games", "db2", "db"), pod("games", "web", "web"), pod("infra", "db3", "db")
	api := fakeAPI{
		namespaces: []corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "games", Labels: map[string]string{"env": "prod"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "infra", Labels: map[string]string{"env": "prod"}}}},
		pods: []corev1.Pod{db1, db2, web, other},
		claims: []resourceapi.ResourceClaim{
			claim(db1, "netclass", "", "blue", "10.1.0.11/24"),
			claim(db1, "netclass", "", "green", "10.2.0.11/24"), // another network
			claim(db2, "netclass", "", "blue", "10.1.0.12/24"),
			claim(web, "netclass", "", "blue", "10.1.0.20/24"),
			claim(other, "netclass", "", "blue", "10.1.0.13/24"),
			claim(db2, "other-class", "", "blue", "10.9.0.12/24"), // another class
		},
	}
	r := Resolver{API: api, Context: func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }}
	blue := network.Network{Ref: attachment.NetworkRef{Class: "netclass", Kind: "PodNetwork", Name: "blue"}}
	dbSel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
	for _, tc := range []struct {
		name string
		to   ncv1.Destination
		want []string
	}{
		{"pods of the namespace", ncv1.Destination{PodSelector: dbSel}, []string{"10.1.0.11", "10.1.0.12"}},
		{"pods of selected namespaces", ncv1.Destination{PodSelector: dbSel, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}},
			[]string{"10.1.0.11", "10.1.0.12", "10.1.0.13"}},
		{"every pod of selected namespaces", ncv1.Destination{NamespaceSelector: &metav1.LabelSelector{}}, []string{"10.1.0.11", "10.1.0.12", "10.1.0.13", "10.1.0.20"}},
		{"nothing selected", ncv1.Destination{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "none"}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.Addresses("games", tc.to, blue)
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, a := range got {
				s = append(s, a.String())
			}
			if !slices.Equal(s, tc.want) {
				t.Fatalf("addresses %v, want %v", s, tc.want)
			}
		})
	}
	bad := ncv1.Destination{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}}
	if _, err := r.Addresses("games", bad, blue); err == nil {
		t.Fatal("an invalid selector was accepted")
	}
}

// A claim shared by pods a (web) and b (db) has an interface in each: a
// selector of web resolves to a's address only, whichever pod attached
// last (networkData shows b's). Without the per-pod list (an older
// status), an address that may be the unselected pod's is left out, and
// used when every pod of the claim is selected.
func TestSharedClaimResolvesEachPodsOwnAddress(t *testing.T) {
	a, b := pod("games", "a", "web"), pod("games", "b", "db")
	shared := func(withPods bool) resourceapi.ResourceClaim {
		c := claim(b, "netclass", "", "blue", "10.1.0.2/24")
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: a.Name, UID: a.UID})
		if withPods {
			c.Status.Devices[0].Data.Raw = []byte(fmt.Sprintf(`{"podNetwork":"blue","networkClass":"netclass","pods":[`+
				`{"uid":%q,"name":"a","interfaceName":"net1","ips":["10.1.0.1/24"]},{"uid":%q,"name":"b","interfaceName":"net1","ips":["10.1.0.2/24"]}]}`, a.UID, b.UID))
		}
		return c
	}
	blue := network.Network{Ref: attachment.NetworkRef{Class: "netclass", Kind: "PodNetwork", Name: "blue"}}
	web := ncv1.Destination{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	for _, tc := range []struct {
		name     string
		withPods bool
		to       ncv1.Destination
		want     []string
	}{
		{"per-pod list, web", true, web, []string{"10.1.0.1"}},
		{"per-pod list, every pod", true, ncv1.Destination{}, []string{"10.1.0.1", "10.1.0.2"}},
		{"older status, web", false, web, nil},
		{"older status, every pod", false, ncv1.Destination{}, []string{"10.1.0.2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Resolver{API: fakeAPI{pods: []corev1.Pod{a, b}, claims: []resourceapi.ResourceClaim{shared(tc.withPods)}},
				Context: func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }}
			got, err := r.Addresses("games", tc.to, blue)
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, x := range got {
				s = append(s, x.String())
			}
			if !slices.Equal(s, tc.want) {
				t.Errorf("addresses %v, want %v", s, tc.want)
			}
		})
	}
}

// On the default network a destination's pods are their primary addresses
// (status.podIPs, both families), kept by the cache's transform; a pod on
// the host's network is none of the default network's, and no claim is
// read.
func TestDefaultNetworkResolvesPodIPs(t *testing.T) {
	db1, db2, web := pod("games", "db1", "db"), pod("games", "db2", "db"), pod("games", "web", "web")
	db1.Status.PodIPs = []corev1.PodIP{{IP: "10.252.1.5"}, {IP: "fd00::5"}}
	db2.Spec.HostNetwork, db2.Status.PodIPs = true, []corev1.PodIP{{IP: "10.250.0.1"}}
	web.Status.PodIPs = []corev1.PodIP{{IP: "10.252.1.6"}}
	var cached []corev1.Pod
	for _, p := range []corev1.Pod{db1, db2, web} {
		out, err := metadataOnly(&p)
		if err != nil {
			t.Fatal(err)
		}
		cached = append(cached, *out.(*corev1.Pod))
	}
	r := Resolver{API: fakeAPI{pods: cached, claims: []resourceapi.ResourceClaim{claim(db1, "netclass", "", "blue", "10.1.0.11/24")}},
		Context: func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }}
	got, err := r.Addresses("games", ncv1.Destination{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}, network.Default())
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[10.252.1.5 fd00::5]" {
		t.Errorf("the default network's db pods are %v, want [10.252.1.5 fd00::5]", got)
	}
}

// On a NetworkAttachmentDefinition's network a selected pod's addresses
// are its network-status entries naming that NAD (kept by the cache's
// transform), not its claims' nor its primary IPs; a pod no kubelet runs
// (no podIPs, or ended) has none, whatever its annotation says.
func TestNADNetworkResolvesNetworkStatus(t *testing.T) {
	db1, db2, web := pod("games", "db1", "db"), pod("games", "db2", "db"), pod("games", "web", "web")
	status := func(entries string) map[string]string {
		return map[string]string{"k8s.v1.cni.cncf.io/network-status": entries, "other": "dropped"}
	}
	db1.Annotations = status(`[{"name":"primary","interface":"eth0","ips":["10.252.1.5"],"default":true},` +
		`{"name":"games/blue","interface":"net1","ips":["10.77.0.5"]},{"name":"games/red","interface":"net2","ips":["10.78.0.5"]}]`)
	db2.Annotations = status(`[{"name":"blue","interface":"nad1","ips":["10.77.0.6","fd77::6"]}]`) // a bare name: the pod's namespace
	web.Annotations = status(`[{"name":"games/blue","interface":"net1","ips":["10.77.0.7"]}]`)
	db1.Status.PodIPs = []corev1.PodIP{{IP: "10.252.1.5"}}
	db2.Status.PodIPs = []corev1.PodIP{{IP: "10.252.1.6"}}
	web.Status.PodIPs = []corev1.PodIP{{IP: "10.252.1.7"}}
	notRun, ended := pod("games", "db3", "db"), pod("games", "db4", "db")
	notRun.Annotations = status(`[{"name":"games/blue","interface":"net1","ips":["10.77.0.8"]}]`)
	ended.Annotations = status(`[{"name":"games/blue","interface":"net1","ips":["10.77.0.9"]}]`)
	ended.Status.PodIPs, ended.Status.Phase = []corev1.PodIP{{IP: "10.252.1.9"}}, corev1.PodFailed
	var cached []corev1.Pod
	for _, p := range []corev1.Pod{db1, db2, web, notRun, ended} {
		out, err := metadataOnly(&p)
		if err != nil {
			t.Fatal(err)
		}
		if _, kept := out.(*corev1.Pod).Annotations["other"]; kept {
			t.Fatalf("the cache keeps annotations other than network-status")
		}
		cached = append(cached, *out.(*corev1.Pod))
	}
	r := Resolver{API: fakeAPI{pods: cached, claims: []resourceapi.ResourceClaim{claim(db1, "netclass", "", "blue", "10.1.0.11/24")}},
		Context: func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }}
	blue := network.FromNAD(types.NamespacedName{Namespace: "games", Name: "blue"})
	got, err := r.Addresses("games", ncv1.Destination{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}, blue)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[10.77.0.5 10.77.0.6 fd77::6]" {
		t.Errorf("the db pods on NAD games/blue are %v, want [10.77.0.5 10.77.0.6 fd77::6]", got)
	}
}

// A pod's network-status, which whoever may update the pod writes, gives
// it at most MaxNADAddressesPerPod addresses on a NAD's network, each
// once, however many entries and addresses it lists.
func TestNADNetworkBoundsAPodsAddresses(t *testing.T) {
	var ips []string
	for i := range 3 * MaxNADAddressesPerPod {
		ips = append(ips, fmt.Sprintf("%q", fmt.Sprintf("10.77.%d.%d", i/200, i%200)))
	}
	list := "[" + strings.Join(ips, ",") + "]"
	db := pod("games", "db", "db")
	db.Status.PodIPs = []corev1.PodIP{{IP: "10.252.1.5"}}
	db.Annotations = map[string]string{"k8s.v1.cni.cncf.io/network-status": `[{"name":"games/blue","interface":"net1","ips":["10.77.0.0","10.77.0.0"]},` +
		`{"name":"games/blue","interface":"net2","ips":` + list + `}]`}
	r := Resolver{API: fakeAPI{pods: []corev1.Pod{db}},
		Context: func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }}
	got, err := r.Addresses("games", ncv1.Destination{PodSelector: &metav1.LabelSelector{}}, network.FromNAD(types.NamespacedName{Namespace: "games", Name: "blue"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxNADAddressesPerPod || got[0].String() != "10.77.0.0" || got[1].String() != "10.77.0.1" {
		t.Fatalf("the pod has %d addresses on the NAD's network: %v", len(got), got)
	}
}

// The cache keeps of a pod's network-status (its users' to write, up to
// 256 KiB, on every node for every pod of the cluster) only what
// resolution reads: the secondary entries' NAD names and first addresses
// that parse (not a string of any length), a bounded number of them; one
// that does not decode, nothing.
func TestCacheKeepsABoundedNetworkStatus(t *testing.T) {
	var entries []multus.Status
	entries = append(entries, multus.Status{Name: "primary", Interface: "eth0", IPs: []string{"10.252.1.5"}, Default: true})
	entries = append(entries, multus.Status{Name: "games/junk", Interface: "net0", IPs: []string{strings.Repeat("x", 200_000)}})
	for i := range 1000 {
		e := multus.Status{Name: fmt.Sprintf("games/n%d", i), Interface: fmt.Sprintf("net%d", i), MAC: "02:00:00:00:00:01"}
		for j := range 100 {
			e.IPs = append(e.IPs, fmt.Sprintf("10.%d.%d.%d", i/250, i%250, j))
		}
		entries = append(entries, e)
	}
	raw, _ := json.Marshal(entries)
	p := pod("games", "db", "db")
	for value, want := range map[string]string{string(raw): "", `[{"name":`: "none", "": "none"} {
		p.Annotations = map[string]string{"k8s.v1.cni.cncf.io/network-status": value}
		out, err := metadataOnly(&p)
		if err != nil {
			t.Fatal(err)
		}
		kept, has := out.(*corev1.Pod).Annotations["k8s.v1.cni.cncf.io/network-status"]
		if want == "none" {
			if has {
				t.Errorf("kept %q of %q", kept, value)
			}
			continue
		}
		got, err := multus.ParseStatus(kept)
		if err != nil || len(got) != maxStatusEntries || got[0].Name != "games/junk" || len(got[0].IPs) != 0 ||
			got[1].Name != "games/n0" || len(got[1].IPs) != MaxNADAddressesPerPod || got[1].IPs[0] != "10.0.0.0" {
			var first []string
			for _, e := range got[:min(2, len(got))] {
				first = append(first, fmt.Sprintf("%s with %d addresses, the first %.40q", e.Name, len(e.IPs), e.IPs[:min(1, len(e.IPs))]))
			}
			t.Fatalf("kept %d entries (%v), the first two: %v", len(got), err, first)
		}
		if len(kept) > 64*1024 {
			t.Errorf("kept %d bytes of a %d-byte annotation", len(kept), len(value))
		}
	}
}
