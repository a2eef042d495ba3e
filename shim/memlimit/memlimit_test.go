package memlimit

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"268435456\n", 241591910, true},
		{"max\n", 0, false},
		{"9223372036854771712\n", 0, false}, // cgroup v1 without a limit
		{"", 0, false},
		{"-1", 0, false},
	} {
		got, ok := Parse(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Parse(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
