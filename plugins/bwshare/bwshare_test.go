package bwshare

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/netclass-dev/netclass/plugins/kernel/tc"
)

func TestRecordAdd(t *testing.T) {
	var r Record
	for _, p := range []Port{
		{HostIf: "a", MAC: "02:00:00:00:00:0a", Rate: 30e6},
		{HostIf: "b", MAC: "02:00:00:00:00:0b", Rate: 30e6, Ceil: 100e6},
		{HostIf: "c", MAC: "02:00:00:00:00:0c", Rate: 0}, // best effort: no class
	} {
		if err := r.Add(100e6, p); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]Entry{
		"a": {MAC: "02:00:00:00:00:0a", Minor: 2, Rate: 30e6, Ceil: 30e6},
		"b": {MAC: "02:00:00:00:00:0b", Minor: 3, Rate: 30e6, Ceil: 100e6},
	}
	if fmt.Sprint(r.Ports) != fmt.Sprint(want) {
		t.Fatalf("ports %v, want %v", r.Ports, want)
	}
	// A port joining again keeps its class; a freed class is reused.
	if err := r.Add(100e6, Port{HostIf: "a", MAC: "02:00:00:00:00:0a", Rate: 20e6}); err != nil {
		t.Fatal(err)
	}
	if e := r.Ports["a"]; e.Minor != 2 || e.Rate != 20e6 {
		t.Errorf("a joining again: %+v, want class 2 at 20M", e)
	}
	delete(r.Ports, "a")
	if err := r.Add(100e6, Port{HostIf: "d", MAC: "02:00:00:00:00:0d", Rate: 10e6}); err != nil {
		t.Fatal(err)
	}
	if e := r.Ports["d"]; e.Minor != 2 {
		t.Errorf("d got class %d, want the freed 2", e.Minor)
	}
	// Joining as best effort removes the class.
	if err := r.Add(100e6, Port{HostIf: "d", Rate: 0}); err != nil || r.Ports["d"].Minor != 0 {
		t.Errorf("d best effort: %+v %v", r.Ports, err)
	}
}

func TestRecordFull(t *testing.T) {
	r := Record{Ports: map[string]Entry{}}
	for m := uint16(firstMinor); m < tc.ShareDefaultMinor; m++ {
		r.Ports[fmt.Sprint(m)] = Entry{Minor: m}
	}
	if err := r.Add(100e6, Port{HostIf: "x", Rate: 1}); err == nil {
		t.Fatal("a class was handed out with every minor taken")
	}
}

func TestPrune(t *testing.T) {
	r := Record{Ports: map[string]Entry{"a": {}, "b": {}, "c": {}}}
	gone := r.Prune(func(h string) bool { return h == "b" })
	if fmt.Sprint(gone) != "[a c]" || len(r.Ports) != 1 {
		t.Errorf("pruned %v, left %v", gone, r.Ports)
	}
}

func TestRender(t *testing.T) {
	for _, c := range []struct {
		name        string
		r           Record
		wantDefault uint64
		wantClasses []tc.ShareClass
		wantMap     map[string]uint32
	}{
		{"three of 30 in 100", Record{Capacity: 100e6, Ports: map[string]Entry{
			"a": {MAC: "m1", Minor: 2, Rate: 30e6, Ceil: 30e6},
			"b": {MAC: "m2", Minor: 3, Rate: 30e6, Ceil: 100e6},
			"c": {MAC: "m3", Minor: 4, Rate: 30e6, Ceil: 30e6},
		}}, 10e6 / 8,
			[]tc.ShareClass{cls(2, 30e6/8, 30e6/8), cls(3, 30e6/8, 100e6/8), cls(4, 30e6/8, 30e6/8)},
			map[string]uint32{"m1": 0x10002, "m2": 0x10003, "m3": 0x10004}},
		{"ceil above the capacity is the capacity; over-committed leaves 0", Record{Capacity: 50e6, Ports: map[string]Entry{
			"a": {MAC: "m1", Minor: 2, Rate: 60e6, Ceil: 80e6},
		}}, 0, []tc.ShareClass{cls(2, 60e6/8, 50e6/8)}, map[string]uint32{"m1": 0x10002}},
		{"empty", Record{Capacity: 100e6}, 100e6 / 8, nil, map[string]uint32{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, m := Render(c.r)
			if s.CapacityBytes != uint64(c.r.Capacity/8) || s.DefaultBytes != c.wantDefault {
				t.Errorf("capacity %d default %d, want %d %d", s.CapacityBytes, s.DefaultBytes, c.r.Capacity/8, c.wantDefault)
			}
			if fmt.Sprint(s.Classes) != fmt.Sprint(c.wantClasses) || fmt.Sprint(m) != fmt.Sprint(c.wantMap) {
				t.Errorf("classes %v map %v, want %v %v", s.Classes, m, c.wantClasses, c.wantMap)
			}
		})
	}
}

// FuzzDecodeRecord: whatever a record file holds, decoding it and
// rendering what decodes never panics, and a rendered class never has a
// rate above its ceil unless the capacity is below the rate.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`{"capacity":100000000,"ports":{"vh0":{"mac":"02:00:00:00:00:01","minor":2,"rate":30000000,"ceil":30000000}}}`))
	f.Add([]byte(`{"capacity":-1,"ports":{"x":{"minor":65535,"rate":-5}}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Record
		if json.Unmarshal(data, &r) != nil {
			return
		}
		s, _ := Render(r)
		for _, c := range s.Classes {
			if c.CeilBytes < c.RateBytes && r.Capacity >= int64(c.RateBytes)*8 {
				t.Fatalf("class %+v: ceil below rate", c)
			}
		}
	})
}

func cls(minor uint16, rate, ceil uint64) tc.ShareClass {
	return tc.ShareClass{Minor: minor, RateBytes: rate, CeilBytes: ceil}
}
