package nad

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
)

func readyConds(status metav1.ConditionStatus, observed int64) []metav1.Condition {
	return []metav1.Condition{{Type: "Ready", Status: status, ObservedGeneration: observed}}
}

func network(ns, name string, status metav1.ConditionStatus, labels map[string]string) *netclassv1alpha1.Network {
	n := &netclassv1alpha1.Network{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Generation: 1, Labels: labels}}
	n.Status.Conditions = readyConds(status, 1)
	return n
}

func podNetwork(name, provider, namespaces string, status metav1.ConditionStatus) *multinetworkv1.PodNetwork {
	pn := &multinetworkv1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1, Labels: map[string]string{"tier": "storage"}}}
	if namespaces != "-" {
		pn.Annotations = map[string]string{AnnotationNamespaces: namespaces}
	}
	pn.Spec.Provider = provider
	pn.Status.Conditions = readyConds(status, 1)
	return pn
}

func TestParseNamespaces(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		errs []string
	}{
		{in: "b, a", want: []string{"a", "b"}},
		{in: "games", want: []string{"games"}},
		{in: "", errs: []string{"empty entry"}},
		{in: "a,,b", errs: []string{"empty entry"}},
		{in: "a,A_b,a", errs: []string{`"A_b" is not a namespace name`, `"a" is listed twice`}},
		{in: "*", errs: []string{`"*" is not`}},
	} {
		got, err := ParseNamespaces(c.in)
		if len(c.errs) == 0 {
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("%q: %v %v, want %v", c.in, got, err, c.want)
			}
			continue
		}
		for _, e := range c.errs {
			if err == nil || !strings.Contains(err.Error(), e) || !strings.Contains(err.Error(), "metadata.annotations.netclass.dev/nad-namespaces") {
				t.Errorf("%q: error %v, want one naming the field and %q", c.in, err, e)
			}
		}
	}
}

func TestWant(t *testing.T) {
	stale := network("blue", "stale", metav1.ConditionTrue, nil)
	stale.Generation = 2
	gone := network("blue", "gone", metav1.ConditionTrue, nil)
	gone.DeletionTimestamp = &metav1.Time{}
	nets := []*netclassv1alpha1.Network{
		network("blue", "vx", metav1.ConditionTrue, map[string]string{"name": "ovn-storage"}),
		network("blue", "down", metav1.ConditionFalse, nil), stale, gone,
		network("games", "storage", metav1.ConditionTrue, nil), // clashes with the PodNetwork's NAD in games
	}
	pns := []*multinetworkv1.PodNetwork{
		podNetwork("storage", "netclass.dev", "games, infra", metav1.ConditionTrue),
		podNetwork("other", "example.com", "infra", metav1.ConditionTrue),
		podNetwork("quiet", "netclass.dev", "-", metav1.ConditionTrue),
		podNetwork("bad", "netclass.dev", "infra,Infra", metav1.ConditionTrue),
		podNetwork("notready", "netclass.dev", "infra", metav1.ConditionFalse),
	}
	want, problems := Want(nets, pns)
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"blue/vx", "infra/storage"}) {
		t.Errorf("NADs %v", keys)
	}
	vx := want["blue/vx"]
	if vx.Network != "blue/vx" || vx.Owner == nil || vx.Owner.UID != "uid-vx" || vx.Labels["name"] != "ovn-storage" || vx.Labels[LabelManagedBy] != "netclass.dev" {
		t.Errorf("blue/vx: %+v", vx)
	}
	if s := want["infra/storage"]; s.Network != "storage" || s.Owner != nil || s.Labels["tier"] != "storage" {
		t.Errorf("infra/storage: %+v", s)
	}
	var who []string
	for _, p := range problems {
		who = append(who, p.Network)
	}
	slices.Sort(who)
	if !slices.Equal(who, []string{"bad", "games/storage", "storage"}) {
		t.Errorf("problems %+v", problems)
	}
}

func TestObject(t *testing.T) {
	want, _ := Want([]*netclassv1alpha1.Network{network("blue", "vx", metav1.ConditionTrue, nil)}, nil)
	d := want["blue/vx"]
	u := Object(d)
	if !Owned(u) || !Current(u, d) || u.GetNamespace() != "blue" || u.GetName() != "vx" || u.GetKind() != "NetworkAttachmentDefinition" {
		t.Fatalf("object %v", u.Object)
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(Config(d)), &cfg); err != nil || cfg["type"] != "netclass-nad" || cfg["network"] != "blue/vx" || cfg["name"] != "vx" || cfg["nad"] != "blue/vx" {
		t.Errorf("config %s %v", Config(d), err)
	}
	changed := d
	changed.Labels = map[string]string{LabelManagedBy: ManagedBy, "x": "y"}
	if Current(u, changed) {
		t.Error("labels changed, still current")
	}
	u.SetFinalizers(nil)
	if Current(u, d) {
		t.Error("finalizer gone, still current")
	}
	hand := Object(d)
	hand.SetLabels(nil)
	if Owned(hand) {
		t.Error("a NAD without the managed-by label is owned")
	}
}

func TestNames(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"vx", []string{"games/vx"}},
		{"blue/vx@net1, storage", []string{"blue/vx", "games/storage"}},
		{`[{"name":"vx","namespace":"blue","interface":"net1"},{"name":"storage"}]`, []string{"blue/vx", "games/storage"}},
		{`[{"name":`, nil},
		{"", nil},
		{"/x, y/", nil},
		{"Blue/vx, blue/Vx, blue/vx, blue/vx@net2", []string{"blue/vx"}}, // no NAD has the others' names; each once
		{manyNames(MaxNames + 36), strings.Split(manyNames(MaxNames), ",")},
	} {
		if got := Names("games", c.in); !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, want %v", c.in, got, c.want)
		}
	}
}

func FuzzParseNamespaces(f *testing.F) {
	for _, s := range []string{"a,b", "", " a , b ", "a,a", "A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseNamespaces(s)
		if err != nil {
			return
		}
		if len(got) == 0 || !slices.IsSorted(got) {
			t.Fatalf("%q: %v", s, got)
		}
		again, err := ParseNamespaces(strings.Join(got, ","))
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("%q: %v does not read back: %v %v", s, got, again, err)
		}
	})
}

// manyNames is an annotation naming n NADs of namespace games.
func manyNames(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("games/n%d", i)
	}
	return strings.Join(names, ",")
}

func FuzzNames(f *testing.F) {
	for _, s := range []string{"vx", "a/b@c, d", `[{"name":"x","namespace":"y"}]`, "[", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names := Names("games", s)
		if len(names) > MaxNames || len(slices.Compact(slices.Sorted(slices.Values(names)))) != len(names) {
			t.Fatalf("%q named %d, or some twice: %v", s, len(names), names)
		}
		for _, n := range names {
			ns, name, ok := strings.Cut(n, "/")
			if !ok || ns == "" || name == "" {
				t.Fatalf("%q named %q", s, n)
			}
		}
	})
}
