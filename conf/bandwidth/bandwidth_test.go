package bandwidth

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
)

func q(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

func TestParseAnnotation(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		want    Policy
		wantErr []string
	}{
		{name: "capacity only", raw: `{"capacity": "100M"}`, want: Policy{Capacity: 100e6, Max: 100e6}},
		{name: "full policy", raw: `{"capacity": "100M", "default": "10M", "min": "1M", "max": "50M", "step": "1M"}`,
			want: Policy{Capacity: 100e6, Default: 10e6, Min: 1e6, Max: 50e6, Step: 1e6}},
		{name: "default is min", raw: `{"capacity": "1G", "min": "30M", "step": "10M"}`,
			want: Policy{Capacity: 1e9, Default: 30e6, Min: 30e6, Max: 1e9, Step: 10e6}},
		{name: "integers", raw: `{"capacity": 100000000, "min": 0}`, want: Policy{Capacity: 100e6, Max: 100e6}},
		{name: "binary suffix", raw: `{"capacity": "1Gi"}`, want: Policy{Capacity: 1 << 30, Max: 1 << 30}},
		{name: "not JSON", raw: `100M`, wantErr: []string{"metadata.annotations[netclass.dev/bandwidth]: not a bandwidth object"}},
		{name: "unknown field", raw: `{"capacity": "100M", "limit": "1G"}`, wantErr: []string{`unknown field "limit"`}},
		{name: "work-conserving", raw: `{"capacity": "100M", "ceiling": "Capacity"}`, want: Policy{Capacity: 100e6, Max: 100e6, Ceiling: "Capacity"}},
		{name: "ceiling allocation", raw: `{"capacity": "100M", "ceiling": "Allocation"}`, want: Policy{Capacity: 100e6, Max: 100e6, Ceiling: "Allocation"}},
		{name: "ceiling unknown", raw: `{"capacity": "100M", "ceiling": "1G"}`, wantErr: []string{`.ceiling: must be Allocation or Capacity, got "1G"`}},
		{name: "trailing data", raw: `{"capacity": "100M"} {}`, wantErr: []string{"trailing data"}},
		{name: "a stray bracket after it", raw: `{"capacity": "100M"}}`, wantErr: []string{"trailing data"}},
		{name: "capacity missing", raw: `{"min": "1M"}`, wantErr: []string{"[netclass.dev/bandwidth].capacity: is required"}},
		{name: "every problem at once", raw: `{"capacity": "-1", "min": "0.5", "step": "-1"}`, wantErr: []string{
			".capacity: must not be negative", ".min: must be a whole number of bits/s", ".step: must not be negative"}},
		{name: "step 0", raw: `{"capacity": "100M", "step": 0}`, wantErr: []string{".step: must be positive"}},
		{name: "too large", raw: `{"capacity": "10E"}`, wantErr: []string{".capacity: must be at most"}},
		{name: "beyond a milli-value", raw: `{"capacity": "9223372036854776"}`, want: Policy{Capacity: 9223372036854776, Max: 9223372036854776}},
		{name: "a fraction beyond a milli-value", raw: `{"capacity": "9223372036854776.5"}`, wantErr: []string{".capacity: must be a whole number of bits/s"}},
		{name: "capacity 0", raw: `{"capacity": 0}`, wantErr: []string{".capacity: must be positive", ".max: must be positive"}},
		{name: "max over capacity", raw: `{"capacity": "100M", "max": "200M"}`, wantErr: []string{".max: 200000000 exceeds the capacity 100000000"}},
		{name: "min over max", raw: `{"capacity": "100M", "min": "60M", "max": "50M", "default": "55M"}`, wantErr: []string{".min: 60000000 exceeds max", ".default: 55000000 is outside"}},
		{name: "default below min", raw: `{"capacity": "100M", "min": "10M", "default": "5M"}`, wantErr: []string{".default: 5000000 is outside [min 10000000"}},
		{name: "default off the step", raw: `{"capacity": "100M", "min": "10M", "default": "15M", "step": "10M"}`, wantErr: []string{".default: 15000000 is not min 10000000 plus a multiple of step"}},
		{name: "max off the step", raw: `{"capacity": "100M", "min": "10M", "max": "95M", "step": "10M"}`, wantErr: []string{".max: 95000000 is not min"}},
		{name: "one step over capacity", raw: `{"capacity": "100M", "min": "90M", "step": "20M"}`, wantErr: []string{".step: min 90000000 plus one step 20000000 exceeds the capacity"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseAnnotation(c.raw)
			if len(c.wantErr) > 0 {
				if err == nil {
					t.Fatalf("accepted %s as %+v", c.raw, got)
				}
				for _, w := range c.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("refused %s: %v", c.raw, err)
			}
			if *got != c.want {
				t.Errorf("got %+v, want %+v", *got, c.want)
			}
		})
	}
}

func TestForPodNetwork(t *testing.T) {
	if p, err := ForPodNetwork(map[string]string{"other": "x"}); p != nil || err != nil {
		t.Errorf("no annotation: got %+v, %v", p, err)
	}
	p, err := ForPodNetwork(map[string]string{ncv1.AnnotationBandwidth: `{"capacity": "100M", "default": "30M"}`})
	if err != nil || p.Default != 30e6 {
		t.Errorf("annotation: got %+v, %v", p, err)
	}
}

func network(bw *ncv1.NetworkBandwidth) *ncv1.Network {
	return &ncv1.Network{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "red"}, Spec: ncv1.NetworkSpec{Bandwidth: bw}}
}

func cluster(bw *ncv1.NetworkBandwidth) *ncv1.ClusterNetwork {
	return &ncv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: "trunk"}, Spec: ncv1.ClusterNetworkSpec{Bandwidth: bw}}
}

func TestForNetwork(t *testing.T) {
	cases := []struct {
		name        string
		cluster, nw *ncv1.NetworkBandwidth
		want        *Policy
		wantErr     string
	}{
		{name: "neither"},
		{name: "inherited", cluster: &ncv1.NetworkBandwidth{Capacity: q("1G"), Default: q("10M")},
			want: &Policy{Capacity: 1e9, Default: 10e6, Max: 1e9}},
		{name: "field by field", cluster: &ncv1.NetworkBandwidth{Capacity: q("1G"), Default: q("10M"), Step: q("1M")},
			nw:   &ncv1.NetworkBandwidth{Capacity: q("100M"), Default: q("30M")},
			want: &Policy{Capacity: 100e6, Default: 30e6, Max: 100e6, Step: 1e6}},
		{name: "network only", nw: &ncv1.NetworkBandwidth{Capacity: q("100M")}, want: &Policy{Capacity: 100e6, Max: 100e6}},
		{name: "raising the capacity", cluster: &ncv1.NetworkBandwidth{Capacity: q("100M")}, nw: &ncv1.NetworkBandwidth{Capacity: q("1G")},
			wantErr: "bandwidth of Network tenant/red: spec.bandwidth.capacity: 1G exceeds the capacity of ClusterNetwork trunk (100M)"},
		{name: "without a capacity", nw: &ncv1.NetworkBandwidth{Default: q("1M")}, wantErr: "spec.bandwidth.capacity: is required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ForNetwork(network(c.nw), cluster(c.cluster))
			switch {
			case c.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case (got == nil) != (c.want == nil) || got != nil && *got != *c.want:
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestMergeDoesNotAlias(t *testing.T) {
	cl := &ncv1.NetworkBandwidth{Capacity: q("1G")}
	own := &ncv1.NetworkBandwidth{Min: q("1M")}
	m := Merge(cl, own)
	m.Capacity.Add(resource.MustParse("1"))
	m.Min.Add(resource.MustParse("1"))
	if cl.Capacity.String() != "1G" || own.Min.String() != "1M" {
		t.Errorf("Merge aliases its inputs: %s, %s", cl.Capacity, own.Min)
	}
	if Merge(nil, nil) != nil {
		t.Error("Merge(nil, nil) is not nil")
	}
}

func TestQuantity(t *testing.T) {
	if got := Quantity(30e6); got.String() != "30M" {
		t.Errorf("Quantity(30e6) = %s", got.String())
	}
}

func TestCeilingOf(t *testing.T) {
	for _, c := range []struct {
		name      string
		pol       *Policy
		allocated int64
		want      int64
	}{
		{"no policy", nil, 30e6, 30e6},
		{"allocation by default", &Policy{Capacity: 100e6}, 30e6, 30e6},
		{"allocation", &Policy{Capacity: 100e6, Ceiling: "Allocation"}, 30e6, 30e6},
		{"capacity", &Policy{Capacity: 100e6, Ceiling: "Capacity"}, 30e6, 100e6},
		{"best effort has none", &Policy{Capacity: 100e6, Ceiling: "Capacity"}, 0, 0},
	} {
		if got := c.pol.CeilingOf(c.allocated); got != c.want {
			t.Errorf("%s: CeilingOf(%d) = %d, want %d", c.name, c.allocated, got, c.want)
		}
	}
}
