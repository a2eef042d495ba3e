package qos

import (
	"reflect"
	"strings"
	"testing"
)

func TestDSCPPolicyValidate(t *testing.T) {
	one := func(v int) *int { return &v }
	for _, tc := range []struct {
		name    string
		policy  DSCPPolicy
		wantErr []string // substrings; none: valid
	}{
		{name: "a range and a value", policy: DSCPPolicy{Allowed: []DSCPRange{{0, 40}, {46, 46}}}},
		{name: "remark inside", policy: DSCPPolicy{Allowed: []DSCPRange{{8, 15}}, Remark: one(8)}},
		{name: "empty", policy: DSCPPolicy{}, wantErr: []string{"dscpPolicy.allowed: must list at least one range"}},
		{name: "too many", policy: DSCPPolicy{Allowed: make([]DSCPRange, MaxDSCPRanges+1)}, wantErr: []string{"dscpPolicy.allowed: at most 64 ranges, got 65"}},
		{name: "reversed and out of range", policy: DSCPPolicy{Allowed: []DSCPRange{{10, 5}, {60, 64}, {-1, 3}}},
			wantErr: []string{"dscpPolicy.allowed[0]: must be a range", "got 10-5", "dscpPolicy.allowed[1]:", "dscpPolicy.allowed[2]:"}},
		{name: "0 left out, no remark", policy: DSCPPolicy{Allowed: []DSCPRange{{8, 15}}}, wantErr: []string{"dscpPolicy.remark: is required when allowed leaves out 0 (allowed 8-15)"}},
		{name: "remark not allowed", policy: DSCPPolicy{Allowed: []DSCPRange{{0, 40}}, Remark: one(46)}, wantErr: []string{"dscpPolicy.remark: 46 is not allowed (allowed 0-40)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.Validate("dscpPolicy")
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate passed, want %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestDSCPPolicyCheck(t *testing.T) {
	v := func(d int) *int { return &d }
	p := &DSCPPolicy{Allowed: []DSCPRange{{0, 40}, {46, 46}}}
	spec := &Spec{DSCP: v(48), Egress: []Rule{{DSCP: v(46)}, {DSCP: v(56)}, {}}}
	err := p.Check(spec, "runtimeConfig.qos")
	if err == nil {
		t.Fatal("Check passed a spec marking with CS6 and CS7")
	}
	for _, w := range []string{"runtimeConfig.qos.dscp: 48 is not allowed by dscpPolicy (allowed 0-40, 46)", "runtimeConfig.qos.egress[1].dscp: 56"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "egress[0]") || strings.Contains(err.Error(), "egress[2]") {
		t.Errorf("error %q names an allowed rule", err)
	}
	var none *DSCPPolicy
	if err := none.Check(spec, "qos"); err != nil {
		t.Errorf("no policy: %v", err)
	}
}

func TestDSCPPolicyCompiles(t *testing.T) {
	v := func(d int) *int { return &d }
	for _, tc := range []struct {
		name   string
		policy *DSCPPolicy
		want   *Remark
	}{
		{"none", nil, nil},
		{"everything", &DSCPPolicy{Allowed: []DSCPRange{{0, 63}}}, nil},
		{"up to 40 and 46", &DSCPPolicy{Allowed: []DSCPRange{{0, 40}, {46, 46}}},
			&Remark{Ranges: []DSCPSpan{{41, 45}, {47, 63}}, To: 0}},
		{"overlapping, remark", &DSCPPolicy{Allowed: []DSCPRange{{10, 20}, {15, 30}, {63, 63}}, Remark: v(10)},
			&Remark{Ranges: []DSCPSpan{{0, 9}, {31, 62}}, To: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := Compile(&Spec{Policy: tc.policy})
			if !reflect.DeepEqual(plan.Remark, tc.want) {
				t.Errorf("Remark = %+v, want %+v", plan.Remark, tc.want)
			}
			if needs := tc.want != nil; plan.NeedsRules() != needs {
				t.Errorf("NeedsRules = %v, want %v", plan.NeedsRules(), needs)
			}
		})
	}
}
