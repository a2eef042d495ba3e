package v1_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/netclass-dev/netclass/api/internal/crdschema"
	"github.com/netclass-dev/netclass/api/internal/roundtrip"
	v1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
)

// seedLastProbeTime is the one field of the Multi-Network DRA design's examples that the Go
// types do not have: their status conditions carry "lastProbeTime: null",
// which metav1.Condition lacks (see PodNetworkStatus.Conditions).
const seedLastProbeTime = `unknown field "status.conditions[0].lastProbeTime"`

// seedDocs lists every example of the seeds that uses NetworkClass or
// PodNetwork, as extracted verbatim into conf/crd/testdata, with the strict
// decoding errors each one is known to produce.
var seedDocs = []struct {
	file        string
	kind        string
	name        string
	wantUnknown []string
}{
	{"seed000-networkclass-ovn-kubernetes.yaml", "NetworkClass", "ovn-kubernetes", nil},
	{"seed004-podnetwork-generic.yaml", "PodNetwork", "net-dataplane", []string{seedLastProbeTime}},
	{"seed004-podnetwork-parameters.yaml", "PodNetwork", "dataplane", []string{seedLastProbeTime}},
}

func testdata(t *testing.T, file string) string {
	t.Helper()
	dir, err := crdschema.Dir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "testdata", file)
}

// strictDecode decodes one YAML document strictly through the scheme and
// returns the object and its strict-decoding errors.
func strictDecode(t *testing.T, raw []byte) (runtime.Object, []string) {
	t.Helper()
	obj, unknown, err := roundtrip.DecodeStrict(newScheme(t), raw)
	if err != nil {
		t.Fatal(err)
	}
	return obj, unknown
}

func TestSeedExamplesDecodeStrictly(t *testing.T) {
	for _, tc := range seedDocs {
		t.Run(tc.file, func(t *testing.T) {
			docs, err := crdschema.ReadDocs(testdata(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(docs) != 1 {
				t.Fatalf("%d documents, want 1", len(docs))
			}
			obj, unknown := strictDecode(t, docs[0].Raw)
			if !slices.Equal(unknown, tc.wantUnknown) {
				t.Fatalf("strict decoding errors %q, want %q", unknown, tc.wantUnknown)
			}
			var spec any
			switch o := obj.(type) {
			case *v1.NetworkClass:
				spec = o.Spec
				if o.Name != tc.name || tc.kind != "NetworkClass" {
					t.Fatalf("decoded NetworkClass %q, want %s %q", o.Name, tc.kind, tc.name)
				}
			case *v1.PodNetwork:
				spec = o.Spec
				if o.Name != tc.name || tc.kind != "PodNetwork" {
					t.Fatalf("decoded PodNetwork %q, want %s %q", o.Name, tc.kind, tc.name)
				}
			default:
				t.Fatalf("decoded %T", obj)
			}
			// The spec re-encoded from the Go type is the spec as written:
			// every field (parameters included, to the last nested value)
			// survived.
			wantSpec := docs[0].Object["spec"]
			data, err := json.Marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			var gotSpec map[string]any
			if err := json.Unmarshal(data, &gotSpec); err != nil {
				t.Fatal(err)
			}
			dropNulls(gotSpec)
			if !reflect.DeepEqual(gotSpec, wantSpec) {
				t.Fatalf("spec after decoding and encoding:\n%v\nwant\n%v", gotSpec, wantSpec)
			}
		})
	}
}

// TestSeedParametersSurvive checks the decoded parameters field by field,
// not only through re-encoding.
func TestSeedParametersSurvive(t *testing.T) {
	docs, err := crdschema.ReadDocs(testdata(t, "seed004-podnetwork-parameters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	obj, _ := strictDecode(t, docs[0].Raw)
	pn, ok := obj.(*v1.PodNetwork)
	if !ok {
		t.Fatalf("decoded %T", obj)
	}
	var params struct {
		Master string `json:"master"`
		Mode   string `json:"mode"`
		IPAM   struct {
			Type       string              `json:"type"`
			Subnet     string              `json:"subnet"`
			RangeStart string              `json:"rangeStart"`
			RangeEnd   string              `json:"rangeEnd"`
			Routes     []map[string]string `json:"routes"`
			Gateway    string              `json:"gateway"`
		} `json:"ipam"`
	}
	if err := json.Unmarshal(pn.Spec.Parameters.Raw, &params); err != nil {
		t.Fatalf("parameters %s: %v", pn.Spec.Parameters.Raw, err)
	}
	if params.Master != "eth0" || params.Mode != "bridge" || params.IPAM.Type != "host-local" ||
		params.IPAM.Subnet != "192.168.1.0/24" || params.IPAM.RangeStart != "192.168.1.200" ||
		params.IPAM.RangeEnd != "192.168.1.216" || params.IPAM.Gateway != "192.168.1.1" ||
		len(params.IPAM.Routes) != 1 || params.IPAM.Routes[0]["dst"] != "0.0.0.0/0" {
		t.Fatalf("parameters did not survive: %+v", params)
	}
	if !pn.Spec.Enabled || pn.Spec.Provider != "example.dra.x-k8s.io/network" {
		t.Fatalf("spec = %+v", pn.Spec)
	}
}

func dropNulls(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(v)
		}
	}
}
