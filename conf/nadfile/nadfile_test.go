package nadfile

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	for _, c := range []struct {
		in, want, file, err string
	}{
		{in: "blue/vx", want: "blue/vx", file: "blue_vx.json"},
		{in: "storage", want: "storage", file: "storage.json"},
		{in: "a/b.c", want: "a/b.c", file: "a_b.c.json"},
		{in: "", err: "network: name"},
		{in: "blue/", err: "network: name"},
		{in: "/vx", err: "network: namespace"},
		{in: "Blue/vx", err: "network: namespace"},
		{in: "blue/vx/x", err: "network: name"},
		{in: "blue/../x", err: "network: name"},
		{in: "a.b/vx", err: "network: namespace"},
		{in: "-x", err: "network: name"},
		{in: strings.Repeat("a", 254), err: "network: name"},
	} {
		r, err := ParseRef("network", c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one containing %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || r.String() != c.want || r.FileName() != c.file {
			t.Errorf("%q: %v %q %q, want %q %q", c.in, err, r, r.FileName(), c.want, c.file)
		}
	}
	if p := Path("/var/lib/netclass", Ref{"blue", "vx"}); p != filepath.Join("/var/lib/netclass", "nad", "blue_vx.json") {
		t.Errorf("path %s", p)
	}
}

func TestEncodeParse(t *testing.T) {
	r := Ref{"blue", "vx"}
	list := []byte(`{"cniVersion":"1.1.0","name":"blue_vx","plugins":[{"type":"netclass-vxlan"}]}`)
	b, err := Encode(r, list)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(b, r)
	if err != nil || string(f.ConfList) != string(list) {
		t.Fatalf("round trip: %v %s", err, b)
	}
	if _, err := Encode(r, []byte("{")); err == nil {
		t.Error("encoded a broken list")
	}
	for _, c := range []struct{ in, err string }{
		{`{"version":"netclass.dev/nad/v2","network":"blue/vx","confList":{}}`, "version: is"},
		{`{"version":"netclass.dev/nad/v1","network":"blue/other","confList":{}}`, "network: is"},
		{`{"version":"netclass.dev/nad/v1","network":"blue/vx","confList":[]}`, "confList: is not"},
		{`{"version":"netclass.dev/nad/v1","network":"blue/vx"}`, "confList: is not"},
		{`[`, "nad file of blue/vx"},
	} {
		if _, err := Parse([]byte(c.in), r); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want %q", c.in, err, c.err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"version":"netclass.dev/nad/v1","network":"blue/vx","confList":{"plugins":[]}}`), "blue/vx")
	f.Add([]byte(`{"version":"netclass.dev/nad/v1","network":"storage","confList":null}`), "storage")
	f.Add([]byte(`{}`), "")
	f.Fuzz(func(t *testing.T, b []byte, ref string) {
		r, err := ParseRef("network", ref)
		if err != nil {
			return
		}
		if strings.ContainsAny(r.FileName(), "/\x00") {
			t.Fatalf("file name %q of %q leaves the directory", r.FileName(), ref)
		}
		file, err := Parse(b, r)
		if err != nil {
			return
		}
		again, err := Encode(r, file.ConfList)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if _, err := Parse(again, r); err != nil {
			t.Fatalf("re-parse: %v", err)
		}
	})
}
