package ruleagent

import (
	"testing"
	"time"
)

func TestSyncDelayBoundsTheFrequencyNotTheLatency(t *testing.T) {
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		since    time.Duration // from the last sync's start to the trigger
		debounce time.Duration
		want     time.Duration
	}{
		{"after a quiet spell: at once", time.Minute, 0, 0},
		{"exactly the default apart: at once", 250 * time.Millisecond, 0, 0},
		{"during a burst: the rest of the default", 100 * time.Millisecond, 0, 150 * time.Millisecond},
		{"right after a sync started", 0, 0, 250 * time.Millisecond},
		{"a set debounce", 300 * time.Millisecond, time.Second, 700 * time.Millisecond},
		{"a set debounce passed", 2 * time.Second, time.Second, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := syncDelay(start, start.Add(tc.since), tc.debounce); got != tc.want {
				t.Errorf("syncDelay(%v after the last start, debounce %v) = %v, want %v", tc.since, tc.debounce, got, tc.want)
			}
		})
	}
}
