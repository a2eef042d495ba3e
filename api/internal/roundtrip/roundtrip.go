// Package roundtrip checks the generated deepcopy functions and the JSON
// form of every kind of an API group with randomly filled objects, the way
// Kubernetes' own API round-trip tests do.
package roundtrip

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"sigs.k8s.io/randfill"
)

// Iterations is the number of random objects tried per kind.
const Iterations = 50

// Kinds returns the kinds the scheme registers for gv, without the meta
// kinds (WatchEvent, options) that metav1.AddToGroupVersion adds.
func Kinds(scheme *runtime.Scheme, gv schema.GroupVersion) []string {
	var kinds []string
	for kind, typ := range scheme.KnownTypes(gv) {
		if typ.PkgPath() == reflect.TypeFor[metav1.Status]().PkgPath() {
			continue
		}
		kinds = append(kinds, kind)
	}
	sort.Strings(kinds)
	return kinds
}

// Test fills objects of every kind of gv at random and checks that
//   - DeepCopyObject returns an equal object of the same type,
//   - changing every value reachable from the copy leaves the original
//     untouched (the copy shares no pointer, slice or map with it),
//   - JSON encoding and decoding returns an equal object.
func Test(t *testing.T, scheme *runtime.Scheme, gv schema.GroupVersion) {
	t.Helper()
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	codecs := serializer.NewCodecFactory(scheme)
	for _, kind := range Kinds(scheme, gv) {
		t.Run(kind, func(t *testing.T) {
			funcs := fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, rawExtensionFuncs)
			filler := fuzzer.FuzzerFor(funcs, rand.NewSource(int64(len(kind))), codecs).NilChance(0.2).NumElements(1, 3)
			for i := 0; i < Iterations; i++ {
				obj, err := scheme.New(gv.WithKind(kind))
				if err != nil {
					t.Fatal(err)
				}
				filler.Fill(obj)
				checkDeepCopy(t, obj)
				checkJSON(t, scheme, obj)
			}
		})
	}
}

// rawExtensionFuncs fills RawExtensions with a random JSON object, the form
// free-form fields (parameters, ipam, rendered config) have on the wire.
func rawExtensionFuncs(serializer.CodecFactory) []any {
	return []any{
		func(r *runtime.RawExtension, c randfill.Continue) {
			m := map[string]any{}
			for i := c.Intn(4); i >= 0; i-- {
				m[c.String(8)] = map[string]any{"s": c.String(8), "n": float64(c.Int31()), "b": c.Bool(), "l": []any{c.String(4)}}
			}
			data, err := json.Marshal(m)
			if err != nil {
				panic(err)
			}
			r.Raw, r.Object = data, nil
		},
	}
}

func mustJSON(t *testing.T, obj any) []byte {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("encode %T: %v", obj, err)
	}
	return data
}

// jsonDiff shows the difference of two JSON documents.
func jsonDiff(t *testing.T, a, b []byte) string {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return cmp.Diff(x, y)
}

func checkDeepCopy(t *testing.T, obj runtime.Object) {
	t.Helper()
	before := mustJSON(t, obj)
	cp := obj.DeepCopyObject()
	if reflect.TypeOf(cp) != reflect.TypeOf(obj) {
		t.Fatalf("DeepCopyObject returned %T for %T", cp, obj)
	}
	if !apiequality.Semantic.DeepEqual(obj, cp) {
		t.Fatalf("deep copy differs from the original (-original +copy):\n%s", jsonDiff(t, before, mustJSON(t, cp)))
	}
	fuzzer.ValueFuzz(cp)
	if apiequality.Semantic.DeepEqual(obj, cp) {
		t.Fatalf("changing every value of the copy of %T changed nothing: the check would be vacuous", obj)
	}
	if after := mustJSON(t, obj); !bytes.Equal(after, before) {
		t.Fatalf("changing the deep copy changed the original (-before +after):\n%s", jsonDiff(t, before, after))
	}
}

func checkJSON(t *testing.T, scheme *runtime.Scheme, obj runtime.Object) {
	t.Helper()
	data := mustJSON(t, obj)
	gvks, _, err := scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatal(err)
	}
	back, err := scheme.New(gvks[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, back); err != nil {
		t.Fatalf("decode %T: %v\n%s", obj, err, data)
	}
	if !apiequality.Semantic.DeepEqual(obj, back) {
		t.Fatalf("JSON round trip changed the object (-before +after):\n%s", jsonDiff(t, data, mustJSON(t, back)))
	}
}

// CheckKinds checks that the scheme registers exactly the given kinds of gv,
// each as the given Go type, in both directions (kind → type, type → kind).
func CheckKinds(t *testing.T, scheme *runtime.Scheme, gv schema.GroupVersion, kinds map[string]runtime.Object) {
	t.Helper()
	for kind, want := range kinds {
		t.Run(kind, func(t *testing.T) {
			gvk := gv.WithKind(kind)
			obj, err := scheme.New(gvk)
			if err != nil {
				t.Fatalf("scheme.New(%s): %v", gvk, err)
			}
			if reflect.TypeOf(obj) != reflect.TypeOf(want) {
				t.Fatalf("scheme.New(%s) = %T, want %T", gvk, obj, want)
			}
			gvks, _, err := scheme.ObjectKinds(want)
			if err != nil || len(gvks) != 1 || gvks[0] != gvk {
				t.Fatalf("ObjectKinds(%T) = %v, %v; want [%s]", want, gvks, err, gvk)
			}
		})
	}
	if got := Kinds(scheme, gv); len(got) != len(kinds) {
		t.Errorf("scheme registers %v in %s, want the %d kinds of the test", got, gv, len(kinds))
	}
}

// DecodeStrict decodes a YAML or JSON object through the scheme with strict
// decoding. It returns the object and the strict errors (unknown or
// duplicate fields), which do not stop the decoding; other errors do.
func DecodeStrict(scheme *runtime.Scheme, data []byte) (runtime.Object, []string, error) {
	s := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{Yaml: true, Strict: true})
	obj, _, err := s.Decode(data, nil, nil)
	if err == nil {
		return obj, nil, nil
	}
	strict, ok := runtime.AsStrictDecodingError(err)
	if !ok || obj == nil {
		return nil, nil, fmt.Errorf("decode: %w", err)
	}
	var msgs []string
	for _, e := range strict.Errors() {
		msgs = append(msgs, e.Error())
	}
	return obj, msgs, nil
}
