package netconf

import (
	"reflect"
	"testing"
)

func TestWarnings(t *testing.T) {
	for _, tc := range []struct {
		stderr string
		want   []string
	}{
		{"", nil},
		{"some diagnostic\n", nil},
		{WarningPrefix + "one\nnoise\n" + WarningPrefix + "two", []string{"one", "two"}},
		{"x " + WarningPrefix + "not at the start\n" + WarningPrefix + "\n", nil},
	} {
		if got := Warnings([]byte(tc.stderr)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Warnings(%q) = %q, want %q", tc.stderr, got, tc.want)
		}
	}
}
