package netconf

import (
	"strings"
	"testing"
)

func TestBandwidthShare(t *testing.T) {
	const base = `{"cniVersion":"1.1.0","name":"v","type":"netclass-vxlan","vni":7,"master":"eth0","bandwidthShare":`
	for _, c := range []struct {
		name, share string
		wantErr     []string
	}{
		{"guarantee", `{"capacity":100000000,"guarantee":30000000}`, nil},
		{"work-conserving", `{"capacity":100000000,"guarantee":30000000,"ceiling":100000000}`, nil},
		{"best effort", `{"capacity":100000000}`, nil},
		{"no capacity", `{"guarantee":30000000}`, []string{"bandwidthShare.capacity: must be between 1", "bandwidthShare.guarantee: must be between 0 and the capacity 0"}},
		{"beyond any link", `{"capacity":500000000000}`, []string{"bandwidthShare.capacity"}},
		{"guarantee above capacity", `{"capacity":100,"guarantee":200}`, []string{"bandwidthShare.guarantee"}},
		{"ceiling below guarantee", `{"capacity":100,"guarantee":50,"ceiling":20}`, []string{"bandwidthShare.ceiling: must be between the guarantee 50"}},
		{"ceiling above capacity", `{"capacity":100,"guarantee":50,"ceiling":200}`, []string{"bandwidthShare.ceiling"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseVXLAN([]byte(base + c.share + "}"))
			if len(c.wantErr) == 0 {
				if err != nil || got.BandwidthShare == nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %s", c.share)
			}
			for _, w := range c.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}
