package nadfile

import (
	"strings"
	"testing"
)

func TestParseNAD(t *testing.T) {
	for _, c := range []struct{ in, err string }{
		{in: "blue/vx"},
		{in: "blue/a.b"},
		{in: "vx", err: `nad: "vx" is not <namespace>/<name>`},
		{in: "", err: `nad: "" is not`},
		{in: "/vx", err: `nad: "/vx" is not`},
		{in: "Blue/vx", err: `nad: "Blue/vx" is not`},
		{in: "blue/", err: `nad: name ""`},
		{in: "blue/vx/x", err: `nad: name "vx/x"`},
	} {
		err := ParseNAD("nad", c.in)
		if (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: error %v, want %q", c.in, err, c.err)
		}
	}
}

func TestNADOf(t *testing.T) {
	for _, c := range []struct{ config, want string }{
		{`{"type":"netclass-bridge","args":{"cni":{},"netclass.dev":{"nad":"blue/vx"}}}`, "blue/vx"},
		{`{"type":"netclass-bridge","args":{"cni":{"nad":"blue/vx"}}}`, ""},
		{`{"type":"netclass-bridge"}`, ""},
		{`{"args":{"netclass.dev":"blue/vx"}}`, ""},
		{`{"args":[]}`, ""},
		{`{`, ""},
		{``, ""},
	} {
		if got := NADOf([]byte(c.config)); got != c.want {
			t.Errorf("%s: %q, want %q", c.config, got, c.want)
		}
	}
}

func FuzzNADOf(f *testing.F) {
	f.Add([]byte(`{"args":{"netclass.dev":{"nad":"blue/vx"}}}`))
	f.Add([]byte(`{"args":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = NADOf(b) // never panics
	})
}
