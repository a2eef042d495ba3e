package qos

import (
	"math"
	"net/netip"
	"strings"

	"github.com/netclass-dev/netclass/conf/field"
)

// Limits of the data plane.
const (
	MaxDSCP     = 63
	MaxPriority = 65535
	// MaxRules bounds the rule list of one attachment: NetworkQoS allows 20
	// rules per object and several objects may select one pod.
	MaxRules = 1024
	// maxBurstBits is the largest burst tbf can hold (4 GiB in bytes).
	maxBurstBits = int64(math.MaxUint32) * 8
)

// What the kernel's tbf can be told (plugins/kernel/tc computes it): a rate
// and a burst of at least one byte; the bucket's fill time (burst / rate) in
// scheduler ticks, at least one and at most a uint32; and the queue limit,
// the bytes arriving during TBFLatency plus the burst, at most a uint32.
// The scheduler tick is 64 ns (15.625 per µs) on every kernel with the
// high-resolution psched clock (2.6.31 on).
const (
	TBFLatencySeconds = 0.025
	TBFTicksPerSecond = 15_625_000
)

// TBFBufferTicks is the bucket's fill time in scheduler ticks, unrounded.
func TBFBufferTicks(rateBytes, burstBytes uint64) float64 {
	return float64(burstBytes) / float64(rateBytes) * TBFTicksPerSecond
}

// TBFLimitBytes is the tbf queue limit, unrounded.
func TBFLimitBytes(rateBytes, burstBytes uint64) float64 {
	return float64(rateBytes)*TBFLatencySeconds + float64(burstBytes)
}

// Validate reports every problem of the spec, each with its field path under p.
func (s *Spec) Validate(p field.Path) error {
	if s == nil {
		return nil
	}
	var errs field.Errors
	errs.Append(validateRate(p, "ingressRate", "ingressBurst", s.IngressRate, s.IngressBurst)...)
	errs.Append(validateRate(p, "egressRate", "egressBurst", s.EgressRate, s.EgressBurst)...)
	if s.DSCP != nil && (*s.DSCP < 0 || *s.DSCP > MaxDSCP) {
		errs.Add(p.Child("dscp"), "must be between 0 and %d, got %d", MaxDSCP, *s.DSCP)
	}
	errs.Append(validateQueue(p.Child("queue"), s.Queue)...)
	if len(s.Egress) > MaxRules {
		errs.Add(p.Child("egress"), "at most %d rules, got %d", MaxRules, len(s.Egress))
	}
	for i := range s.Egress {
		errs.Append(s.Egress[i].validate(p.Child("egress").Index(i)))
	}
	return errs.Err()
}

func validateRate(p field.Path, rateName, burstName string, rate, burst int64) []error {
	var errs field.Errors
	switch {
	case rate < 0:
		errs.Add(p.Child(rateName), "must not be negative, got %d", rate)
	case burst < 0:
		errs.Add(p.Child(burstName), "must not be negative, got %d", burst)
	case rate > 0 && burst == 0:
		errs.Add(p.Child(burstName), "is required when %s is set", rateName)
	case rate == 0 && burst > 0:
		errs.Add(p.Child(rateName), "is required when %s is set", burstName)
	case burst > maxBurstBits:
		errs.Add(p.Child(burstName), "must be at most %d bits (4 GiB), got %d", maxBurstBits, burst)
	case rate == 0:
	case rate < 8:
		errs.Add(p.Child(rateName), "must be at least 8 bits/s (tbf counts whole bytes), got %d", rate)
	case burst < 8:
		errs.Add(p.Child(burstName), "must be at least 8 bits (tbf counts whole bytes), got %d", burst)
	default:
		rateB, burstB := uint64(rate)/8, uint64(burst)/8
		ticks := TBFBufferTicks(rateB, burstB)
		switch {
		case ticks < 1:
			errs.Add(p.Child(burstName), "is too small for %s %d: the bucket would fill in under one scheduler tick (64 ns)", rateName, rate)
		case ticks > math.MaxUint32:
			errs.Add(p.Child(burstName), "is %.0f s of %s; tbf holds at most %d s", float64(burstB)/float64(rateB), rateName, math.MaxUint32/TBFTicksPerSecond)
		case TBFLimitBytes(rateB, burstB) > math.MaxUint32:
			errs.Add(p.Child(rateName), "and %s overflow tbf's queue limit (%d bytes)", burstName, uint64(math.MaxUint32))
		}
	}
	return errs
}

// Validate reports every problem of the rule alone, each with its field
// path under p (Spec.Validate checks each of its rules so).
func (r *Rule) Validate(p field.Path) error { return r.validate(p) }

func (r *Rule) validate(p field.Path) error {
	var errs field.Errors
	if r.Priority < 0 || r.Priority > MaxPriority {
		errs.Add(p.Child("priority"), "must be between 0 and %d, got %d", MaxPriority, r.Priority)
	}
	if r.DSCP != nil && (*r.DSCP < 0 || *r.DSCP > MaxDSCP) {
		errs.Add(p.Child("dscp"), "must be between 0 and %d, got %d", MaxDSCP, *r.DSCP)
	}
	if r.DSCP == nil && r.Bandwidth == nil {
		errs.Add(p, "sets neither dscp nor bandwidth, so it would do nothing")
	}
	if b := r.Bandwidth; b != nil {
		if b.Rate <= 0 {
			errs.Add(p.Child("bandwidth").Child("rate"), "must be a positive number of kbps, got %d", b.Rate)
		}
		if b.Burst < 0 {
			errs.Add(p.Child("bandwidth").Child("burst"), "must not be negative, got %d", b.Burst)
		}
		if b.Rate > math.MaxUint32 || b.Burst > math.MaxUint32/125 {
			errs.Add(p.Child("bandwidth"), "rate and burst must fit the kernel meter (rate <= %d kbps, burst <= %d kilobits)", uint64(math.MaxUint32), uint64(math.MaxUint32/125))
		}
	}
	errs.Append(r.Classifier.validate(p.Child("classifier")))
	return errs.Err()
}

func (c *Classifier) validate(p field.Path) error {
	var errs field.Errors
	for i, peer := range c.To {
		pp := p.Child("to").Index(i)
		if peer.IPBlock == nil {
			errs.Add(pp, "must set ipBlock (pod and namespace selectors are resolved before the plugin)")
			continue
		}
		errs.Append(peer.IPBlock.validate(pp.Child("ipBlock")))
	}
	for i, port := range c.Ports {
		pp := p.Child("ports").Index(i)
		if _, ok := protocolNumber(port.Protocol); !ok {
			errs.Add(pp.Child("protocol"), "must be TCP, UDP or SCTP, got %q", port.Protocol)
		}
		if port.Port != nil && (*port.Port < 1 || *port.Port > 65535) {
			errs.Add(pp.Child("port"), "must be between 1 and 65535, got %d", *port.Port)
		}
	}
	return errs.Err()
}

func (b *IPBlock) validate(p field.Path) error {
	var errs field.Errors
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		errs.Add(p.Child("cidr"), "not a CIDR: %q", b.CIDR)
		return errs.Err()
	}
	for i, ex := range b.Except {
		e, err := netip.ParsePrefix(ex)
		switch {
		case err != nil:
			errs.Add(p.Child("except").Index(i), "not a CIDR: %q", ex)
		case e.Addr().Is4() != cidr.Addr().Is4():
			errs.Add(p.Child("except").Index(i), "%s is not of the same IP family as cidr %s", ex, b.CIDR)
		case !cidr.Masked().Contains(e.Addr()) || e.Bits() < cidr.Bits():
			errs.Add(p.Child("except").Index(i), "%s is not inside cidr %s", ex, b.CIDR)
		}
	}
	return errs.Err()
}

// Protocol numbers of the transport protocols a classifier may name.
const (
	ProtoTCP  = 6
	ProtoUDP  = 17
	ProtoSCTP = 132
)

func protocolNumber(name string) (uint8, bool) {
	switch strings.ToUpper(name) {
	case "TCP":
		return ProtoTCP, true
	case "UDP":
		return ProtoUDP, true
	case "SCTP":
		return ProtoSCTP, true
	}
	return 0, false
}
