package crdschema

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// Nested returns the value at a path of object keys.
func Nested(obj map[string]any, path ...string) (any, bool) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[p]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// normalize makes JSON values comparable whatever decoded them (int64 from
// the API client, float64 from YAML).
func normalize(t testing.TB, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// WantField is a Case.Check: the stored object has want at the dotted path.
func WantField(path string, want any) func(testing.TB, map[string]any) {
	return func(t testing.TB, stored map[string]any) {
		t.Helper()
		got, ok := Nested(stored, strings.Split(path, ".")...)
		if !ok {
			t.Fatalf("stored object has no %s", path)
		}
		if !reflect.DeepEqual(normalize(t, got), normalize(t, want)) {
			t.Fatalf("stored %s = %v, want %v", path, got, want)
		}
	}
}

// WantNoField is a Case.Check: the stored object has nothing at the dotted path.
func WantNoField(path string) func(testing.TB, map[string]any) {
	return func(t testing.TB, stored map[string]any) {
		t.Helper()
		if got, ok := Nested(stored, strings.Split(path, ".")...); ok {
			t.Fatalf("stored object has %s = %v, want none", path, got)
		}
	}
}

// All combines Case.Checks.
func All(checks ...func(testing.TB, map[string]any)) func(testing.TB, map[string]any) {
	return func(t testing.TB, stored map[string]any) {
		t.Helper()
		for _, c := range checks {
			c(t, stored)
		}
	}
}
