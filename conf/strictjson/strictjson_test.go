package strictjson

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestDecode(t *testing.T) {
	type obj struct {
		A int `json:"a"`
	}
	for _, c := range []struct {
		raw      string
		trailing bool
		ok       bool
	}{
		{`{"a":1}`, false, true},
		{" {\"a\":1} \n\t", false, true},
		{`{"a":1}}`, true, false},
		{`{"a":1}]`, true, false},
		{`{"a":1}{"a":2}`, true, false},
		{`{"a":1} x`, true, false},
		{`{"a":1,"b":2}`, false, false},
		{`{"a":1`, false, false},
		{``, false, false},
	} {
		var o obj
		err := Decode([]byte(c.raw), &o)
		if (err == nil) != c.ok || errors.Is(err, ErrTrailing) != c.trailing {
			t.Errorf("Decode(%q) = %v, want ok %v, trailing %v", c.raw, err, c.ok, c.trailing)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1}}`, `[1]`, `1 2`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var v any
		if Decode(raw, &v) == nil && !json.Valid(raw) { // Valid: raw is exactly one JSON value
			t.Fatalf("accepted %q, which is not one JSON value", raw)
		}
	})
}
