package clusternetwork

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
)

func TestValidateBandwidth(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	for _, tc := range []struct {
		name string
		bw   *netclassv1alpha1.NetworkBandwidth
		want []string // "" = valid
	}{
		{name: "unset"},
		{name: "valid", bw: &netclassv1alpha1.NetworkBandwidth{Capacity: q("1G"), Default: q("50M"), Step: q("10M")}},
		{name: "every problem named", bw: &netclassv1alpha1.NetworkBandwidth{Capacity: q("1G"), Default: q("55M"), Max: q("2G"), Step: q("10M")},
			want: []string{"bandwidth of ClusterNetwork trunk: ", "spec.bandwidth.max: 2000000000 exceeds the capacity", "spec.bandwidth.default: 55000000 is not min 0 plus a multiple of step"}},
		{name: "capacity missing", bw: &netclassv1alpha1.NetworkBandwidth{Default: q("1M")}, want: []string{"spec.bandwidth.capacity: is required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cn := &netclassv1alpha1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: "trunk"}, Spec: netclassv1alpha1.ClusterNetworkSpec{Bandwidth: tc.bw}}
			err := ValidateBandwidth(cn)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
