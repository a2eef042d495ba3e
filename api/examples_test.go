package api_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/netclass-dev/netclass/api/internal/crdschema"
	"github.com/netclass-dev/netclass/api/internal/roundtrip"
	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
)

// allowedUnknown are the strict-decoding errors a manifest is known to
// produce against the Go types: the Multi-Network DRA design writes "lastProbeTime" in its
// status conditions, a field metav1.Condition does not have.
var allowedUnknown = map[string][]string{
	"seed004-podnetwork-generic.yaml":    {`unknown field "status.conditions[0].lastProbeTime"`},
	"seed004-podnetwork-parameters.yaml": {`unknown field "status.conditions[0].lastProbeTime"`},
}

// exampleFiles lists every manifest of kinds of this repository: the seed
// examples in conf/crd/testdata and the examples in conf/examples/k8s.
func exampleFiles(t *testing.T) []string {
	t.Helper()
	dir, err := crdschema.Dir()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, pattern := range []string{
		filepath.Join(dir, "testdata", "*.yaml"),
		filepath.Join(dir, "..", "examples", "k8s", "*.yaml"),
	} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		if len(m) == 0 {
			t.Fatalf("no manifests match %s", pattern)
		}
		files = append(files, m...)
	}
	return files
}

func bothGroups(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{multinetworkv1.AddToScheme, netclassv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return scheme
}

// decodeStrict returns the decoded object and its strict-decoding errors.
func decodeStrict(t *testing.T, scheme *runtime.Scheme, data []byte) (runtime.Object, []string) {
	t.Helper()
	obj, unknown, err := roundtrip.DecodeStrict(scheme, data)
	if err != nil {
		t.Fatal(err)
	}
	return obj, unknown
}

// TestExamples checks every example and seed manifest: it decodes strictly
// into the Go types, the schema accepts it with strict field validation, and
// what the API server would store decodes into the Go types without losing
// a field.
func TestExamples(t *testing.T) {
	crds := crdschema.LoadRepo(t)
	s := bothGroups(t)
	kinds := map[string]bool{}
	for _, file := range exampleFiles(t) {
		docs, err := crdschema.ReadDocs(file)
		if err != nil {
			t.Fatal(err)
		}
		if len(docs) == 0 {
			t.Errorf("%s holds no object", file)
		}
		for i, doc := range docs {
			t.Run(filepath.Base(file)+"/"+doc.Object["kind"].(string)+"/"+strconv.Itoa(i), func(t *testing.T) {
				if _, unknown := decodeStrict(t, s, doc.Raw); !slices.Equal(unknown, allowedUnknown[filepath.Base(file)]) {
					t.Fatalf("strict decoding errors %q, want %q", unknown, allowedUnknown[filepath.Base(file)])
				}
				crd, ok := crds[doc.Object["kind"].(string)]
				if !ok {
					t.Fatalf("no CRD for kind %v", doc.Object["kind"])
				}
				kinds[crd.Definition.Spec.Names.Kind] = true
				res := crd.Create(doc.Object)
				if res.Refused() {
					t.Fatalf("refused: %s", res.Error())
				}
				stored, err := json.Marshal(res.Object)
				if err != nil {
					t.Fatal(err)
				}
				obj, unknown := decodeStrict(t, s, stored)
				if len(unknown) > 0 {
					t.Fatalf("the stored object has fields the Go types lack: %q", unknown)
				}
				back, err := json.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				var got map[string]any
				if err := json.Unmarshal(back, &got); err != nil {
					t.Fatal(err)
				}
				var want map[string]any
				if err := json.Unmarshal(stored, &want); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(clean(got["spec"]), clean(want["spec"])) {
					t.Fatalf("spec through the Go types:\n%s\nas stored:\n%s", back, stored)
				}
			})
		}
	}
	for _, kind := range []string{"NetworkClass", "PodNetwork", "ClusterNetwork", "NodeNetwork", "Network", "NetworkQoS"} {
		if !kinds[kind] {
			t.Errorf("no example of %s", kind)
		}
	}
}

// clean drops nulls and empty objects, which the Go encoder writes for unset
// non-pointer structs and the API server does not store.
func clean(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			e = clean(e)
			if e == nil {
				continue
			}
			if m, ok := e.(map[string]any); ok && len(m) == 0 {
				continue
			}
			out[k] = e
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = clean(e)
		}
		return out
	default:
		return v
	}
}
