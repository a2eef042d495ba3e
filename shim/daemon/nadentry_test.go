package daemon

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/plugins/attach"
)

func nadObject(ns, name string, labels, annotations map[string]string, config string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition"}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	u.SetResourceVersion("7")
	if config != "" {
		_ = unstructured.SetNestedField(u.Object, config, "spec", "config")
	}
	return u
}

// The cache keeps a NAD's labels, netclass's network annotation and its
// config's CNI network name, as Multus names it; never the config, nor
// other annotations.
func TestNADEntryOf(t *testing.T) {
	big := strings.Repeat("x", 4096)
	obj, err := nadEntryOf(nadObject("t1", "vx", map[string]string{"tier": "a"},
		map[string]string{contract.NADNetworkAnnotation: "t1/vx", "kubectl.kubernetes.io/last-applied-configuration": big},
		`{"cniVersion":"1.1.0","name":"vx","type":"netclass-nad","network":"t1/vx","secret":"`+big+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	e, ok := obj.(*nadEntry)
	if !ok {
		t.Fatalf("%T, want *nadEntry", obj)
	}
	if e.Namespace != "t1" || e.Name != "vx" || e.ResourceVersion != "7" || e.Labels["tier"] != "a" || e.ConfigName != "t1_vx" ||
		len(e.Annotations) != 1 || e.Annotations[contract.NADNetworkAnnotation] != "t1/vx" {
		t.Errorf("entry %+v", e)
	}
	c, ok := e.DeepCopyObject().(*nadEntry)
	if !ok || c.ConfigName != "t1_vx" || c.Labels["tier"] != "a" {
		t.Errorf("copy %+v", c)
	}
	if marker, _ := nadEntryOf("tombstone"); marker != "tombstone" {
		t.Errorf("a deletion marker became %v", marker)
	}
	for _, tc := range []struct{ config, want string }{
		{`{"cniVersion":"1.0.0","name":"blue","type":"netclass-bridge"}`, "blue"},
		{`{"cniVersion":"1.0.0","type":"netclass-bridge"}`, "hand"}, // Multus names it after the NAD
		{`{"cniVersion":"1.0.0","name":"","plugins":[{"type":"netclass-bridge"}]}`, "hand"},
		{`{"cniVersion":"1.0.0","name":"list","plugins":[{"type":"netclass-bridge"}]}`, "list"},
		{`{"cniVersion":"1.1.0","name":"vx","type":"netclass-nad","network":"blue/vx"}`, "blue_vx"}, // its network's list
		{`{"cniVersion":"1.1.0","name":"vx","type":"netclass-nad","network":"pn"}`, "pn"},
		{`{"cniVersion":"1.1.0","name":"vx","type":"netclass-nad","network":"a/b/c"}`, ""},
		{``, "hand"}, // Multus runs the node's config file named so
		{`{`, ""},    // Multus cannot run it either
		{`{"name":7}`, ""},
	} {
		if got := configName("hand", tc.config); got != tc.want {
			t.Errorf("config %q: name %q, want %q", tc.config, got, tc.want)
		}
	}
}

// A network-status entry is the interface's NAD only if that NAD runs the
// CNI network the interface was made on: a generated NAD its network's
// list, another its config.
func TestNADMismatch(t *testing.T) {
	mark := map[string]string{contract.NADManagedByLabel: contract.Provider}
	gen := func(network string) *nadEntry {
		return nadMeta("t1", "x", mark, map[string]string{contract.NADNetworkAnnotation: network})
	}
	hand := func(configName string) *nadEntry {
		e := nadMeta("t1", "x", nil, nil)
		e.ConfigName = configName
		return e
	}
	nad := types.NamespacedName{Namespace: "t1", Name: "x"}
	for _, tc := range []struct {
		name      string
		recorded  madeOn
		entry     *nadEntry
		wantEmpty bool
		want      string
	}{
		{"a Network's generated NAD", madeOn{Network: "t1_vx"}, gen("t1/vx"), true, ""},
		{"a PodNetwork's generated NAD", madeOn{Network: "pn"}, gen("pn"), true, ""},
		{"another network's generated NAD", madeOn{Network: "t1_vx"}, gen("t1/other"), false, `netclass's NAD of network t1/other, but the interface was made on CNI network "t1_vx"`},
		{"a PodNetwork's, the interface a Network's", madeOn{Network: "t1_vx"}, gen("vx"), false, "network vx"},
		{"a hand-written NAD of the config", madeOn{Network: "blue"}, hand("blue"), true, ""},
		{"a hand-written NAD of another config", madeOn{Network: "t1_vx"}, hand("blue"), false, `whose config is CNI network "blue", but the interface was made on CNI network "t1_vx"`},
		{"a hand-written NAD whose config does not parse", madeOn{Network: "t1_vx"}, hand(""), true, ""},
		{"a generated NAD whose annotation does not parse", madeOn{Network: "t1_vx"}, gen("a/b/c"), false, "network a/b/c"},
		{"marked but naming no network: hand-written", madeOn{Network: "blue"}, nadMeta("t1", "x", mark, nil), true, ""},
		{"no such NAD", madeOn{Network: "t1_vx"}, nil, false, "names NetworkAttachmentDefinition t1/x, which does not exist"},
		{"the NAD its generated NAD's record names", madeOn{"pn", "t1/x"}, gen("pn"), true, ""},
		{"another namespace's generated NAD of its PodNetwork", madeOn{"pn", "t2/x"}, gen("pn"), false,
			"names NetworkAttachmentDefinition t1/x, but the interface was made through NetworkAttachmentDefinition t2/x"},
		{"the NAD its record names, of another network now", madeOn{"pn", "t1/x"}, gen("other"), false, "netclass's NAD of network other"},
		{"the NAD its record names, gone", madeOn{"pn", "t1/x"}, nil, false, "which does not exist"},
	} {
		got := nadMismatch(tc.recorded, nad, tc.entry)
		if (got == "") != tc.wantEmpty || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A record says what its interface was made on: its network, and the NAD
// netclass-nad's args name in its configuration.
func TestMadeOnOf(t *testing.T) {
	r := &attach.Record{Network: "pn", Config: []byte(`{"type":"netclass-bridge","args":{"cni":{},"netclass.dev":{"nad":"t1/x"}}}`)}
	if got := madeOnOf(r); got != (madeOn{Network: "pn", NAD: "t1/x"}) {
		t.Errorf("%+v", got)
	}
	r.Config = []byte(`{"type":"netclass-bridge"}`)
	if got := madeOnOf(r); got != (madeOn{Network: "pn"}) {
		t.Errorf("%+v", got)
	}
}

// The NAD cache, filled from the API as an informer is, answers lookups
// with nadEntry.
func TestNADCache(t *testing.T) {
	mark := map[string]string{contract.NADManagedByLabel: contract.Provider}
	client := nadClient(t, nadObject("t1", "hand", nil, nil, `{"cniVersion":"1.0.0","name":"blue","type":"netclass-bridge"}`),
		nadObject("t1", "storage", mark, map[string]string{contract.NADNetworkAnnotation: "storage"}, `{"type":"netclass-nad","network":"storage"}`),
		nadObject("t1", "vx", mark, map[string]string{contract.NADNetworkAnnotation: "t1/vx"}, `{"type":"netclass-nad","network":"t1/vx"}`))
	fac, lister, err := nadCache(client)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer fac.Shutdown()
	defer cancel()
	fac.Start(ctx.Done())
	for gvr, ok := range fac.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v not synced", gvr)
		}
	}
	l := &nadLookup{}
	l.set(lister)
	if e, cached := l.entry("t1", "hand"); !cached || e == nil || e.ConfigName != "blue" {
		t.Errorf("t1/hand: %+v (cached %v), want its config's name blue", e, cached)
	}
	if e, cached := l.entry("t1", "absent"); !cached || e != nil {
		t.Errorf("t1/absent: %+v (cached %v), want none, cached", e, cached)
	}
	if _, cached := (&nadLookup{}).entry("t1", "hand"); cached {
		t.Error("a lookup without a cache says it has one")
	}
	// A generated NAD's attachments are on the network it stands for.
	src := &foreignSource{nads: l}
	for nad, want := range map[string]string{"storage": "PodNetwork storage", "vx": "Network t1/vx", "hand": "", "absent": ""} {
		got := src.backing(types.NamespacedName{Namespace: "t1", Name: nad})
		if (got == nil) != (want == "") || got != nil && got.Kind+" "+strings.TrimPrefix(got.Namespace+"/", "/")+got.Name != want {
			t.Errorf("NAD t1/%s stands for %+v, want %q", nad, got, want)
		}
	}
}

// nadClient is a fake dynamic client holding the NADs.
func nadClient(t *testing.T, nads ...*unstructured.Unstructured) *dynamicfake.FakeDynamicClient {
	t.Helper()
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{nadResource: "NetworkAttachmentDefinitionList"})
	for _, n := range nads {
		// created by resource: the fake's guess from the kind is not the CRD's plural
		if _, err := client.Resource(nadResource).Namespace(n.GetNamespace()).Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return client
}
