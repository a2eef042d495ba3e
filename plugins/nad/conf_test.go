package nad

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, in string
		code     uint
		errs     []string
		ref      string
	}{
		{name: "network", in: `{"cniVersion":"1.0.0","name":"vx","type":"netclass-nad","network":"blue/vx"}`, ref: "blue/vx"},
		{name: "podnetwork", in: `{"cniVersion":"1.0.0","name":"s","type":"netclass-nad","network":"storage","stateDir":"/run/x","args":{"cni":{}}}`, ref: "storage"},
		{name: "everything wrong", in: `{"name":"","type":"bridge","network":"Blue/","stateDir":"rel","args":[1]}`, code: 7,
			errs: []string{"type: is \"bridge\"", "name: is required", "network: namespace", "network: name", "stateDir: \"rel\"", "args: is not an object"}},
		{name: "nad", in: `{"cniVersion":"1.0.0","name":"vx","type":"netclass-nad","network":"blue/vx","nad":"blue/vx"}`, ref: "blue/vx"},
		{name: "bad nad", in: `{"name":"vx","type":"netclass-nad","network":"blue/vx","nad":"vx"}`, code: 7, errs: []string{`nad: "vx" is not <namespace>/<name>`}},
		{name: "bad nad name", in: `{"name":"vx","type":"netclass-nad","network":"blue/vx","nad":"blue/Vx"}`, code: 7, errs: []string{`nad: name "Vx"`}},
		{name: "no network", in: `{"name":"x","type":"netclass-nad"}`, code: 7, errs: []string{"network: name \"\""}},
		{name: "not JSON", in: `{`, code: 6},
	} {
		conf, err := Parse([]byte(c.in))
		if c.code == 0 {
			if err != nil || conf.Ref.String() != c.ref {
				t.Errorf("%s: %v, ref %v", c.name, err, conf)
			}
			continue
		}
		var te *types.Error
		if !errors.As(err, &te) || te.Code != c.code {
			t.Errorf("%s: error %v, want CNI code %d", c.name, err, c.code)
			continue
		}
		for _, e := range c.errs {
			if !strings.Contains(te.Msg, e) {
				t.Errorf("%s: %q does not name %q", c.name, te.Msg, e)
			}
		}
	}
}

func TestDefaultStateDir(t *testing.T) {
	c, err := Parse([]byte(`{"name":"vx","type":"netclass-nad","network":"blue/vx"}`))
	if err != nil || c.StateDir != "/var/lib/netclass" {
		t.Fatalf("%v %+v", err, c)
	}
}

func TestWithArgs(t *testing.T) {
	list := []byte(`{"cniVersion":"1.1.0","name":"n","plugins":[{"type":"a"},{"type":"b","args":{"x":1}}]}`)
	for _, c := range []struct{ args, nad, want string }{
		{args: "", want: string(list)},
		{args: "null", want: string(list)},
		{args: `{"cni":{"qos":{"dscp":10}}}`, want: `{"cniVersion":"1.1.0","name":"n","plugins":[{"args":{"cni":{"qos":{"dscp":10}}},"type":"a"},{"args":{"cni":{"qos":{"dscp":10}}},"type":"b"}]}`},
		{args: "", nad: "blue/vx", want: `{"cniVersion":"1.1.0","name":"n","plugins":[{"args":{"netclass.dev":{"nad":"blue/vx"}},"type":"a"},{"args":{"netclass.dev":{"nad":"blue/vx"}},"type":"b"}]}`},
		// the caller's block of netclass-nad's key is never passed on
		{args: `{"cni":{"mac":"m"},"netclass.dev":{"nad":"red/forged"}}`, nad: "blue/vx",
			want: `{"cniVersion":"1.1.0","name":"n","plugins":[{"args":{"cni":{"mac":"m"},"netclass.dev":{"nad":"blue/vx"}},"type":"a"},{"args":{"cni":{"mac":"m"},"netclass.dev":{"nad":"blue/vx"}},"type":"b"}]}`},
		{args: `{"netclass.dev":{"nad":"red/forged"}}`, want: `{"cniVersion":"1.1.0","name":"n","plugins":[{"args":{},"type":"a"},{"args":{},"type":"b"}]}`},
	} {
		got, err := withArgs(list, json.RawMessage(c.args), c.nad)
		if err != nil || string(got) != c.want {
			t.Errorf("args %s, nad %q:\n got %s %v\nwant %s", c.args, c.nad, got, err, c.want)
		}
	}
}

func TestCNIArgs(t *testing.T) {
	got := cniArgs("IgnoreUnknown=true;K8S_POD_NAME=a=b;;=x;bare")
	want := [][2]string{{"IgnoreUnknown", "true"}, {"K8S_POD_NAME", "a=b"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestListName(t *testing.T) {
	c, _ := Parse([]byte(`{"name":"vx","type":"netclass-nad","network":"blue/vx"}`))
	p, _ := Parse([]byte(`{"name":"vx","type":"netclass-nad","network":"storage"}`))
	if ListName(c.Ref) != "blue_vx" || ListName(p.Ref) != "storage" {
		t.Errorf("%s %s", ListName(c.Ref), ListName(p.Ref))
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"vx","type":"netclass-nad","network":"blue/vx"}`))
	f.Add([]byte(`{"name":"s","type":"netclass-nad","network":"storage","stateDir":"/x","args":{},"runtimeConfig":{"mac":"x"}}`))
	f.Add([]byte(`{"type":"netclass-nad","network":"a/b/c"}`))
	f.Add([]byte(`{"name":"vx","type":"netclass-nad","network":"blue/vx","nad":"blue/vx"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			var te *types.Error
			if !errors.As(err, &te) || te.Code == 0 {
				t.Fatalf("error without a CNI code: %v", err)
			}
			return
		}
		if strings.ContainsAny(c.Ref.FileName(), "/\x00") || c.StateDir == "" {
			t.Fatalf("accepted %q: file %q, stateDir %q", b, c.Ref.FileName(), c.StateDir)
		}
	})
}

func TestEmpty(t *testing.T) {
	for _, c := range []struct {
		v    any
		want bool
	}{{nil, true}, {"", true}, {[]any{}, true}, {"02:00:00:00:00:01", false}, {[]any{"10.0.0.1/24"}, false}} {
		if got := empty(c.v); got != c.want {
			t.Errorf("empty(%#v) = %v", c.v, got)
		}
	}
}
