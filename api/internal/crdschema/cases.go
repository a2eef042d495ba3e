package crdschema

import (
	"fmt"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// Case is one schema test: an object that the API server must accept or
// refuse. The same cases run offline (RunOffline) and against a real API
// server (RunLive).
type Case struct {
	// Name names the subtest.
	Name string
	// Old, when set, is created first; the case is then an update from Old
	// to Obj (and its CEL transition rules apply).
	Old string
	// Obj is the object (YAML) created, or the update applied to Old.
	Obj string
	// Status makes the update go through the status subresource.
	Status bool
	// WantErr is empty when the request must succeed; otherwise it matches
	// the refusal's message: its parts separated by "*" must appear in it in
	// order (the API server and the offline validators render some values
	// differently: a CEL rule's value is shown as its type by the server).
	WantErr string
	// Check, if set, inspects the object as stored after a successful request.
	Check func(t testing.TB, stored map[string]any)
}

// decodeYAML decodes YAML into JSON values the way the API server decodes a
// request body: integers become int64, other numbers float64.
func decodeYAML(data []byte) (map[string]any, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("decode YAML: %w", err)
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(j, &obj); err != nil {
		return nil, fmt.Errorf("decode JSON: %w", err)
	}
	return obj, nil
}

// ParseObject decodes one YAML object.
func ParseObject(s string) (map[string]any, error) {
	obj, err := decodeYAML([]byte(s))
	if err != nil {
		return nil, err
	}
	if len(obj) == 0 {
		return nil, fmt.Errorf("empty object")
	}
	return obj, nil
}

func kindOf(obj map[string]any) string {
	k, _ := obj["kind"].(string)
	return k
}

// RunOffline runs the cases through the CRDs' validation machinery.
func RunOffline(t *testing.T, crds map[string]*CRD, cases []Case) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			obj, err := ParseObject(tc.Obj)
			if err != nil {
				t.Fatal(err)
			}
			crd, ok := crds[kindOf(obj)]
			if !ok {
				t.Fatalf("no CRD for kind %q", kindOf(obj))
			}
			var res Result
			switch {
			case tc.Old == "":
				res = crd.Create(obj)
			default:
				oldObj, err := ParseObject(tc.Old)
				if err != nil {
					t.Fatal(err)
				}
				created := crd.Create(oldObj)
				if created.Refused() {
					t.Fatalf("creating the old object was refused: %s", created.Error())
				}
				if tc.Status {
					res = crd.UpdateStatus(created.Object, obj)
				} else {
					res = crd.Update(created.Object, obj)
				}
			}
			checkOutcome(t, tc, res.Refused(), res.Error(), res.Object)
		})
	}
}

func checkOutcome(t *testing.T, tc Case, refused bool, msg string, stored map[string]any) {
	t.Helper()
	if refused {
		t.Logf("refused: %s", msg)
	}
	switch {
	case tc.WantErr == "" && refused:
		t.Fatalf("refused, want accepted: %s", msg)
	case tc.WantErr != "" && !refused:
		t.Fatalf("accepted, want refused with %q", tc.WantErr)
	case tc.WantErr != "" && !matches(msg, tc.WantErr):
		t.Fatalf("refused with %q, want a message containing %q", msg, tc.WantErr)
	}
	if !refused && tc.Check != nil {
		tc.Check(t, stored)
	}
}

// matches reports whether the "*"-separated parts of pattern occur in msg in order.
func matches(msg, pattern string) bool {
	for _, part := range strings.Split(pattern, "*") {
		i := strings.Index(msg, part)
		if i < 0 {
			return false
		}
		msg = msg[i+len(part):]
	}
	return true
}
