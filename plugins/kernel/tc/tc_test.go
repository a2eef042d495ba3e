package tc

import (
	"math"
	"testing"

	cfg "github.com/netclass-dev/netclass/conf/qos"
)

func TestTokenBucketMath(t *testing.T) {
	tests := []struct {
		name              string
		rate, burst       uint64
		ticksPerUsec      float64
		wantBuf, wantLimt uint32
	}{
		// 1 MB/s with a 100 kB burst fills in 100 ms = 100000 us.
		{"1MBps", 1_000_000, 100_000, 1, 100_000, 25_000 + 100_000},
		{"ticks scale", 1_000_000, 100_000, 15.625, 1_562_500, 125_000},
		{"zero rate", 0, 10, 1, 0, 10},
		// 10 Mbit/s (1.25 MB/s) with a 200 kbit (25 kB) burst: 20 ms.
		{"10Mbit", 1_250_000, 25_000, 1, 20_000, 31_250 + 25_000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := bufferTicks(tc.rate, tc.burst, tc.ticksPerUsec); got != tc.wantBuf {
				t.Errorf("bufferTicks = %d, want %d", got, tc.wantBuf)
			}
			if got := limitBytes(tc.rate, tc.burst); got != tc.wantLimt {
				t.Errorf("limitBytes = %d, want %d", got, tc.wantLimt)
			}
		})
	}
}

// TestTokenBucketFitsWhatValidationAccepts: at the edges conf/qos accepts,
// the qdisc parameters tc computes are non-zero and not wrapped.
func TestTokenBucketFitsWhatValidationAccepts(t *testing.T) {
	for _, s := range []cfg.Spec{
		{EgressRate: 8, EgressBurst: 8 * 274},
		{EgressRate: 1 << 40, EgressBurst: 8 * 8800},
		{EgressRate: 8, EgressBurst: 8},
		{EgressRate: 10_000_000_000, EgressBurst: 8 * (math.MaxUint32 - 31_250_000)},
	} {
		if err := s.Validate("qos"); err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
		sh := cfg.Compile(&s).Egress
		buf := bufferTicks(sh.RateBytes, sh.BurstBytes, cfg.TBFTicksPerSecond/1e6)
		limit := limitBytes(sh.RateBytes, sh.BurstBytes)
		if buf == 0 || float64(buf) > cfg.TBFBufferTicks(sh.RateBytes, sh.BurstBytes)+1 || float64(buf) < cfg.TBFBufferTicks(sh.RateBytes, sh.BurstBytes)-1 {
			t.Errorf("%+v: buffer %d ticks, want %.0f", s, buf, cfg.TBFBufferTicks(sh.RateBytes, sh.BurstBytes))
		}
		if limit == 0 || float64(limit) < cfg.TBFLimitBytes(sh.RateBytes, sh.BurstBytes)-1 {
			t.Errorf("%+v: limit %d bytes wrapped, want %.0f", s, limit, cfg.TBFLimitBytes(sh.RateBytes, sh.BurstBytes))
		}
	}
}
