package harness

import (
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name, stat string
		want       CPUTimes
		err        bool
	}{
		{"plain", "2372 (netclass-dra) S 1 2372 2372 0 -1 4194560 9641 412 0 0 12 7 130 45 20 0 9 0 1234 0 0",
			CPUTimes{Self: 190 * time.Millisecond, Children: 1750 * time.Millisecond}, false},
		{"name with spaces and parentheses", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 5 0 0",
			CPUTimes{Self: 30 * time.Millisecond, Children: 70 * time.Millisecond}, false},
		{"no name", "7 a R 1", CPUTimes{}, true},
		{"truncated", "7 (a) R 1 7 7 0 -1 0 0 0 0 0 1 2", CPUTimes{}, true},
		{"not a number", "7 (a) R 1 7 7 0 -1 0 0 0 0 0 x 2 3 4 20", CPUTimes{}, true},
		{"negative", "7 (a) R 1 7 7 0 -1 0 0 0 0 0 1 -2 3 4 20", CPUTimes{}, true},
		{"past a Duration", "7 (a) R 1 7 7 0 -1 0 0 0 0 0 1 2 3 922337203685477580 20", CPUTimes{}, true},
	}
	for _, tc := range tests {
		got, err := parseStatCPU(tc.stat)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: parseStatCPU = %+v, %v; want %+v, error %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func FuzzParseStatCPU(f *testing.F) {
	f.Add("2372 (netclass-dra) S 1 2372 2372 0 -1 4194560 9641 412 0 0 12 7 130 45 20 0 9 0 1234 0 0")
	f.Add("7 (a) b)) R 1 7 7 0 -1 0 0 0 0 0 1 2 3 4 20")
	f.Fuzz(func(t *testing.T, stat string) {
		got, err := parseStatCPU(stat)
		if err == nil && (got.Self < 0 || got.Children < 0 || got.Self%clockTick != 0 || got.Children%clockTick != 0) {
			t.Fatalf("parseStatCPU(%q) = %+v: not a whole number of ticks", stat, got)
		}
	})
}
