package bandwidth

import "testing"

// FuzzParseAnnotation: no input panics, and what is accepted is a policy
// the API server accepts (Validate, which mirrors it) with its invariants.
func FuzzParseAnnotation(f *testing.F) {
	for _, s := range []string{
		`{"capacity": "100M"}`,
		`{"capacity": "100M", "default": "10M", "min": "1M", "max": "50M", "step": "1M"}`,
		`{"capacity": 1, "step": 1}`,
		`{"capacity": "9223372036854775807", "min": "9223372036854775806", "step": "1"}`,
		`{"capacity": "1e3", "min": "0.5"}`,
		`{"capacity": "100Mi", "max": "-1"}`,
		`{}`, `null`, `[]`, `{"capacity": {}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := ParseAnnotation(raw)
		if err != nil {
			return
		}
		if p == nil {
			t.Fatalf("%q: nil policy without an error", raw)
		}
		if err := p.Validate(""); err != nil {
			t.Fatalf("%q: accepted an invalid policy %+v: %v", raw, *p, err)
		}
		if !(0 <= p.Min && p.Min <= p.Default && p.Default <= p.Max && p.Max <= p.Capacity) {
			t.Fatalf("%q: bounds out of order: %+v", raw, *p)
		}
		if p.Step > 0 && ((p.Default-p.Min)%p.Step != 0 || (p.Max-p.Min)%p.Step != 0) {
			t.Fatalf("%q: off the step: %+v", raw, *p)
		}
	})
}
