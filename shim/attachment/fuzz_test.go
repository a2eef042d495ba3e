package attachment

import (
	"encoding/json"
	"testing"
)

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig"}`,
		`{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","interfaceName":"net7","mac":"02:00:00:00:00:01","ips":["10.1.1.5/24"],"qos":{"dscp":46,"egress":[{"priority":1,"dscp":10,"classifier":{"to":[{"ipBlock":{"cidr":"10.0.0.0/8"}}]}}]}}`,
		`{"ips":["fd00::1/64","fd00::1/64"]}`,
		`{"mac":"zz"}`,
		`null`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := ParseConfig(raw)
		if err != nil {
			return
		}
		// A valid config survives a round trip and stays valid.
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("marshal %+v: %v", c, err)
		}
		if _, err := ParseConfig(out); err != nil {
			t.Fatalf("round trip of %s: %v", out, err)
		}
		if m := Merge(c, c); m.Validate() != nil {
			t.Fatalf("Merge of a valid config is invalid: %v", m.Validate())
		}
	})
}
