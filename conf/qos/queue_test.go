package qos

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestQueue(t *testing.T) {
	rate := func(q string) Spec { return Spec{EgressRate: 8000, EgressBurst: 800, Queue: q} }
	tests := []struct {
		name     string
		spec     Spec
		err      string // substring of the validation error; "" means valid
		queue    string
		explicit bool
	}{
		{name: "default", spec: rate(""), queue: QueueFQCodel},
		{name: "fq_codel named", spec: rate("fq_codel"), queue: QueueFQCodel, explicit: true},
		{name: "cake", spec: rate("cake"), queue: QueueCake, explicit: true},
		{name: "tbf alone", spec: rate("tbf"), queue: QueueTBF, explicit: true},
		{name: "queue without a shaper asks for nothing", spec: Spec{Queue: "cake"}, queue: QueueCake, explicit: true},
		{name: "case matters", spec: rate("FQ_CODEL"), err: `qos.queue: must be one of fq_codel, cake, tbf, got "FQ_CODEL"`},
		{name: "unknown", spec: rate("pfifo"), err: `qos.queue: must be one of fq_codel, cake, tbf, got "pfifo"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Validate("qos")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Validate() = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			p := Compile(&tc.spec)
			if p.Queue != tc.queue || p.ExplicitQueue != tc.explicit {
				t.Errorf("plan queue %q explicit %v, want %q %v", p.Queue, p.ExplicitQueue, tc.queue, tc.explicit)
			}
		})
	}
	if !(&Spec{Queue: "cake"}).IsZero() {
		t.Error("a spec with only a queue must ask for nothing")
	}
}

func TestMergeQueue(t *testing.T) {
	base := &Spec{EgressRate: 8, EgressBurst: 8, Queue: QueueCake}
	if got := Merge(base, &Spec{DSCP: intp(1)}); got.Queue != QueueCake {
		t.Errorf("an override without queue keeps the base's, got %q", got.Queue)
	}
	if got := Merge(base, &Spec{Queue: QueueTBF}); got.Queue != QueueTBF {
		t.Errorf("an override's queue wins, got %q", got.Queue)
	}
	if got := WithBandwidth(&Spec{Queue: QueueTBF}, &RuntimeBandwidth{EgressRate: 8, EgressBurst: 8}); got.Queue != QueueTBF || got.EgressRate != 8 {
		t.Errorf("kubelet's bandwidth keeps the configured queue, got %+v", got)
	}
	var s Spec
	if err := json.Unmarshal([]byte(`{"queue":"cake"}`), &s); err != nil || s.Queue != QueueCake {
		t.Errorf("decode queue: %+v, %v", s, err)
	}
}
