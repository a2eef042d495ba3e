package multus

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// what Multus v4.3.0 wrote on the test bed (gateway "<nil>" is its own)
const bedStatus = `[{"name":"netclass-testbed","interface":"eth0","ips":["10.252.1.5"],"mac":"8a:1b:2c:3d:4e:5f","default":true,"dns":{},"gateway":["<nil>"]},` +
	`{"name":"t1/ncbr","interface":"net1","ips":["10.77.0.2"],"mac":"02:00:00:00:00:01","dns":{}},` +
	`{"name":"bare","interface":"net2","ips":["10.78.0.2"]}]`

func TestNADOf(t *testing.T) {
	entries, err := ParseStatus(bedStatus)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ifname string
		want   types.NamespacedName
		ok     bool
	}{
		{"net1", types.NamespacedName{Namespace: "t1", Name: "ncbr"}, true},
		{"net2", types.NamespacedName{Namespace: "pods", Name: "bare"}, true}, // a bare name: the pod's namespace
		{"eth0", types.NamespacedName{}, false},                               // the default network is no NAD
		{"net3", types.NamespacedName{}, false},
	}
	for _, tc := range tests {
		got, entry, ok := NADOf(entries, "pods", tc.ifname)
		if got != tc.want || ok != tc.ok {
			t.Errorf("NADOf(%s) = %v, %v; want %v, %v", tc.ifname, got, ok, tc.want, tc.ok)
		}
		if ok && entry.Interface != tc.ifname {
			t.Errorf("NADOf(%s) entry %+v", tc.ifname, entry)
		}
	}
	if _, e, _ := NADOf(entries, "pods", "net1"); !reflect.DeepEqual(e.IPs, []string{"10.77.0.2"}) || e.MAC != "02:00:00:00:00:01" {
		t.Errorf("net1 entry %+v", e)
	}
}

func TestParseStatus(t *testing.T) {
	tests := []struct {
		in      string
		n       int
		wantErr bool
	}{
		{"", 0, false},
		{"  ", 0, false},
		{"[]", 0, false},
		{bedStatus, 3, false},
		{"{", 0, true},
		{`{"name":"x"}`, 0, true}, // an object, not a list
	}
	for _, tc := range tests {
		got, err := ParseStatus(tc.in)
		if (err != nil) != tc.wantErr || len(got) != tc.n {
			t.Errorf("ParseStatus(%q) = %d entries, %v; want %d, error %v", tc.in, len(got), err, tc.n, tc.wantErr)
		}
	}
}

func TestParseNADName(t *testing.T) {
	tests := []struct {
		in   string
		want types.NamespacedName
		err  bool
	}{
		{"a/b", types.NamespacedName{Namespace: "a", Name: "b"}, false},
		{"b", types.NamespacedName{Namespace: "ns", Name: "b"}, false},
		{"b.c", types.NamespacedName{Namespace: "ns", Name: "b.c"}, false},
		{"A/b", types.NamespacedName{}, true},
		{"a/", types.NamespacedName{}, true},
		{"/b", types.NamespacedName{}, true},
		{"a/b/c", types.NamespacedName{}, true},
		{"", types.NamespacedName{}, true},
	}
	for _, tc := range tests {
		got, err := ParseNADName(tc.in, "ns")
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("ParseNADName(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func FuzzParseStatus(f *testing.F) {
	for _, s := range []string{"", "[]", bedStatus, `[{"name":"a/b","interface":"net1"}]`, "{"} {
		f.Add(s, "net1")
	}
	f.Fuzz(func(t *testing.T, value, ifname string) {
		entries, err := ParseStatus(value)
		if err != nil {
			return
		}
		nad, e, ok := NADOf(entries, "ns", ifname)
		if ok && (e.Interface != ifname || e.Default || nad.Name == "" || nad.Namespace == "") {
			t.Fatalf("NADOf gave %v from %+v", nad, e)
		}
		if ok {
			if _, err := ParseNADName(nad.Namespace+"/"+nad.Name, "x"); err != nil {
				t.Fatalf("NADOf's %v does not parse back: %v", nad, err)
			}
		}
	})
}

func TestUnnamed(t *testing.T) {
	asked := func(status string) map[string]string {
		a := map[string]string{AnnotationNetworks: "t1/ncbr"}
		if status != "-" {
			a[AnnotationNetworkStatus] = status
		}
		return a
	}
	tests := []struct {
		name        string
		annotations map[string]string
		ifname      string
		want        string // a part of the reason; "" for none
	}{
		{"named", asked(bedStatus), "net1", ""},
		{"a bare name, in the pod's namespace", asked(bedStatus), "net2", ""},
		{"the default network", asked(bedStatus), "eth0", ""},
		{"no request for Multus networks", map[string]string{}, "net1", ""},
		{"no request, a status anyway", map[string]string{AnnotationNetworkStatus: `[]`}, "net1", ""},
		{"no status yet", asked("-"), "net1", "has no k8s.v1.cni.cncf.io/network-status annotation"},
		{"no entry for it", asked(bedStatus), "net3", "has no entry for interface net3"},
		{"does not parse", asked(`{`), "net1", "annotation k8s.v1.cni.cncf.io/network-status: unexpected end of JSON input"},
		{"no valid NAD", asked(`[{"name":"T1/x","interface":"net1"}]`), "net1", `interface net1: network "T1/x": namespace "T1"`},
	}
	for _, tc := range tests {
		got := Unnamed(tc.annotations, "pods", tc.ifname)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: Unnamed = %q, want %q", tc.name, got, tc.want)
		}
	}
}
