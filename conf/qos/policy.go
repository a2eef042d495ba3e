package qos

import (
	"fmt"
	"slices"
	"strings"

	"github.com/netclass-dev/netclass/conf/field"
)

// DSCPPolicy is the DSCP values an admin lets an attachment's packets carry
// to the fabric: the plugins' top-level `dscpPolicy` key (rendered from a
// ClusterNetwork's spec.dscpPolicy). It lives outside the qos block, so
// nothing from the pod's side (runtimeConfig.qos, args.cni.qos, a
// NetworkQoS) can widen it. It is enforced twice:
//
//   - what a tenant asks to mark with (qos.dscp, a rule's dscp) must be
//     allowed: a configuration is refused naming the field, a NetworkQoS
//     rule is left out and named;
//   - a packet the pod marked itself with a value not allowed leaves with
//     Remark, as an untrusted switch port re-marks it. The packets netclass
//     marks are re-marked after that with their (allowed) DSCP.
type DSCPPolicy struct {
	// Allowed lists the ranges of allowed DSCP values (at least one).
	Allowed []DSCPRange `json:"allowed"`
	// Remark is the DSCP a packet whose own DSCP is not allowed leaves
	// with (nil: 0). It must be allowed itself.
	Remark *int `json:"remark,omitempty"`
}

// DSCPRange is an inclusive range of DSCP values.
type DSCPRange struct {
	First int `json:"first"`
	Last  int `json:"last"`
}

// MaxDSCPRanges bounds a policy's ranges: 64 single values cover them all.
const MaxDSCPRanges = 64

// Validate reports every problem of the policy under p.
func (dp *DSCPPolicy) Validate(p field.Path) error {
	if dp == nil {
		return nil
	}
	var errs field.Errors
	switch n := len(dp.Allowed); {
	case n == 0:
		errs.Add(p.Child("allowed"), "must list at least one range of DSCP values")
	case n > MaxDSCPRanges:
		errs.Add(p.Child("allowed"), "at most %d ranges, got %d", MaxDSCPRanges, n)
	}
	for i, r := range dp.Allowed {
		at := p.Child("allowed").Index(i)
		if r.First < 0 || r.Last > MaxDSCP || r.First > r.Last {
			errs.Add(at, "must be a range of DSCP values, first <= last, both between 0 and %d, got %d-%d", MaxDSCP, r.First, r.Last)
		}
	}
	if len(errs) > 0 {
		return errs.Err()
	}
	if !dp.Allows(dp.remark()) {
		if dp.Remark == nil {
			errs.Add(p.Child("remark"), "is required when allowed leaves out 0 (%s)", dp)
		} else {
			errs.Add(p.Child("remark"), "%d is not allowed (%s): packets would be re-marked with a value the policy forbids", *dp.Remark, dp)
		}
	}
	return errs.Err()
}

// Allows reports whether packets may carry DSCP d; a nil policy allows all.
func (dp *DSCPPolicy) Allows(d int) bool {
	if dp == nil {
		return true
	}
	return slices.ContainsFunc(dp.Allowed, func(r DSCPRange) bool { return r.First <= d && d <= r.Last })
}

func (dp *DSCPPolicy) remark() int {
	if dp.Remark == nil {
		return 0
	}
	return *dp.Remark
}

// String lists the allowed values, e.g. "allowed 0-40, 46".
func (dp *DSCPPolicy) String() string {
	parts := make([]string, 0, len(dp.Allowed))
	for _, r := range dp.Allowed {
		if r.First == r.Last {
			parts = append(parts, fmt.Sprint(r.First))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r.First, r.Last))
		}
	}
	return "allowed " + strings.Join(parts, ", ")
}

// Check reports every DSCP value of s (under p) that the policy does not
// allow. A nil policy or spec has none.
func (dp *DSCPPolicy) Check(s *Spec, p field.Path) error {
	if dp == nil || s == nil {
		return nil
	}
	var errs field.Errors
	if s.DSCP != nil && !dp.Allows(*s.DSCP) {
		errs.Add(p.Child("dscp"), "%d is not allowed by dscpPolicy (%s)", *s.DSCP, dp)
	}
	for i := range s.Egress {
		errs.Append(dp.CheckRule(&s.Egress[i], p.Child("egress").Index(i)))
	}
	return errs.Err()
}

// CheckRule reports a rule's DSCP the policy does not allow, under p.
func (dp *DSCPPolicy) CheckRule(r *Rule, p field.Path) error {
	if dp == nil || r.DSCP == nil || dp.Allows(*r.DSCP) {
		return nil
	}
	return field.Invalid(p.Child("dscp"), "%d is not allowed by dscpPolicy (%s)", *r.DSCP, dp)
}

// Remark is a compiled DSCPPolicy: packets whose DSCP lies in one of
// Ranges (the values not allowed) are re-marked with To.
type Remark struct {
	Ranges []DSCPSpan
	To     uint8
}

// DSCPSpan is an inclusive range of DSCP values.
type DSCPSpan struct{ From, To uint8 }

// compile returns the ranges the policy leaves out; nil when it allows
// every value (nothing to re-mark). The policy must be valid.
func (dp *DSCPPolicy) compile() *Remark {
	if dp == nil {
		return nil
	}
	out := &Remark{To: uint8(dp.remark())}
	from := -1
	for d := 0; d <= MaxDSCP+1; d++ {
		switch allowed := d > MaxDSCP || dp.Allows(d); {
		case !allowed && from < 0:
			from = d
		case allowed && from >= 0:
			out.Ranges = append(out.Ranges, DSCPSpan{From: uint8(from), To: uint8(d - 1)})
			from = -1
		}
	}
	if len(out.Ranges) == 0 {
		return nil
	}
	return out
}
