package netconf

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

func vlanConf(pcpMap string) []byte {
	s := `{"cniVersion":"1.1.0","name":"v","type":"netclass-vlan","master":"eth1","vlanId":100`
	if pcpMap != "" {
		s += `,"pcpMap":` + pcpMap
	}
	return []byte(s + "}")
}

func TestPCPMap(t *testing.T) {
	def := DefaultPCPTable()
	for d, want := range map[int]uint8{0: 0, 7: 0, 8: 1, 10: 1, 26: 3, 34: 4, 40: 5, 46: 5, 48: 6, 56: 7, 63: 7} {
		if def[d] != want {
			t.Errorf("default PCP of DSCP %d = %d, want %d", d, def[d], want)
		}
	}
	many := make([]string, 0, 65)
	for i := range 65 {
		many = append(many, `"`+strings.Repeat("1", 1+i%2)+`":1`)
	}
	tests := []struct {
		name    string
		pcpMap  string
		code    uint
		errs    []string      // substrings of the error
		entries map[int]uint8 // checked entries of the table
	}{
		{name: "no map: the default", pcpMap: "", entries: map[int]uint8{46: 5, 10: 1, 0: 0}},
		{name: "a map replaces the default whole", pcpMap: `{"46":6,"10":2}`, entries: map[int]uint8{46: 6, 10: 2, 34: 0, 8: 0}},
		{name: "empty map: every PCP 0", pcpMap: `{}`, entries: map[int]uint8{46: 0, 63: 0}},
		{name: "edges", pcpMap: `{"0":7,"63":0}`, entries: map[int]uint8{0: 7, 63: 0}},
		{name: "pcp out of range", pcpMap: `{"46":8,"10":-1}`, code: 7,
			errs: []string{`pcpMap["46"]: must be a PCP from 0 to 7, got 8`, `pcpMap["10"]: must be a PCP from 0 to 7, got -1`}},
		{name: "pcp not a number", pcpMap: `{"46":"5","8":1.5,"9":true}`, code: 7,
			errs: []string{`pcpMap["46"]: must be a PCP from 0 to 7, got "5"`, `pcpMap["8"]: must be a PCP from 0 to 7, got 1.5`, `pcpMap["9"]: must be a PCP from 0 to 7, got true`}},
		{name: "keys not DSCP values", pcpMap: `{"64":1,"046":1,"-1":1,"ef":1,"":1," 1":1}`, code: 7,
			errs: []string{`pcpMap["64"]: the key must be a DSCP value`, `pcpMap["046"]`, `pcpMap["-1"]`, `pcpMap["ef"]`, `pcpMap[""]`, `pcpMap[" 1"]`}},
		{name: "a key twice", pcpMap: `{"46":5,"46":6}`, code: 7, errs: []string{`pcpMap["46"]: is given twice`}},
		{name: "more than 64 entries", pcpMap: "{" + strings.Join(many, ",") + "}", code: 7, errs: []string{"pcpMap: at most 64 entries (one per DSCP value), got 65"}},
		{name: "not an object", pcpMap: `[5]`, code: 7, errs: []string{"pcpMap: cannot use JSON array"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseVLAN(vlanConf(tc.pcpMap))
			if tc.code != 0 {
				var e *types.Error
				if !errors.As(err, &e) || e.Code != tc.code {
					t.Fatalf("ParseVLAN = %v, want CNI error %d", err, tc.code)
				}
				for _, w := range tc.errs {
					if !strings.Contains(e.Msg, w) {
						t.Errorf("error %q\ndoes not contain %q", e.Msg, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for d, want := range tc.entries {
				if c.PCP[d] != want {
					t.Errorf("PCP of DSCP %d = %d, want %d", d, c.PCP[d], want)
				}
			}
		})
	}
}

func TestPCPMapRoundTrip(t *testing.T) {
	var m PCPMap
	in := `{"46":5,"10":1,"0":0}`
	if err := json.Unmarshal([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(m)
	if err != nil || string(out) != in {
		t.Errorf("round trip: %s, %v; want %s (order kept)", out, err, in)
	}
}

// FuzzPCPMap: whatever pcpMap holds, ParseVLAN either refuses it with a CNI
// error naming pcpMap, or gives a table of PCPs 0 to 7 that holds exactly
// the map's entries.
func FuzzPCPMap(f *testing.F) {
	for _, seed := range []string{`{}`, `{"46":5}`, `{"0":7,"63":0}`, `{"46":5,"46":6}`, `{"64":1}`, `{"046":1}`, `[1]`, `"x"`, `{"1":"2"}`, `{"1":1e0}`, `null`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, pcpMap string) {
		c, err := ParseVLAN(vlanConf(pcpMap))
		var e *types.Error
		if err != nil {
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a CNI error", err)
			}
			return
		}
		var m map[string]int
		if json.Unmarshal([]byte(pcpMap), &m) != nil && pcpMap != "null" && pcpMap != "" { // "": no pcpMap key at all
			t.Fatalf("accepted %q, which is no map of integers", pcpMap)
		}
		for d, pcp := range c.PCP {
			want, ok := m[strconv.Itoa(d)]
			if m == nil {
				want, ok = int(d>>3), true
			}
			if !ok {
				want = 0
			}
			if int(pcp) != want || pcp > MaxPCP {
				t.Fatalf("map %q: PCP of DSCP %d = %d, want %d", pcpMap, d, pcp, want)
			}
		}
	})
}
