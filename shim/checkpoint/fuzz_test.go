package checkpoint

import "testing"

func FuzzDecode(f *testing.F) {
	good, _ := Encode(record("c1", "p1"))
	f.Add(good)
	f.Add([]byte(`{"version":1,"uid":"u","namespace":"n","name":"c","pods":null,"devices":[{"request":"r","pool":"p","device":"d","network":{"class":"","group":"","version":"","kind":"","name":""},"confList":{},"attachments":[{"podUID":"p","sandboxID":"s","netns":"","ifName":"net1","state":"Attached","result":{"interfaceName":"net1","ips":["10.0.0.1/24"]}}]}],"preparedAt":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := Decode(raw)
		if err != nil {
			return
		}
		out, err := Encode(c)
		if err != nil {
			t.Fatalf("encode a decoded record: %v", err)
		}
		if _, err := Decode(out); err != nil {
			t.Fatalf("round trip: %v", err)
		}
	})
}
