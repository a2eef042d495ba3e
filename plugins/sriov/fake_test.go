package sriov

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeVFs is a vfControl keeping VF settings in a JSON file, shared by the
// plugin processes of one test and the test itself. It models a driver:
// every VF has every setting, and a change of the setting named FailOn is
// refused.
type fakeVFs struct {
	path string
}

type fakeData struct {
	VFs    map[string]vfState `json:"vfs"` // by "<pf>/<index>"
	FailOn string             `json:"failOn,omitempty"`
	// FailFrom, when set, fails every SetVF from that call on (counted in Calls).
	FailFrom int `json:"failFrom,omitempty"`
	Calls    int `json:"calls"`
}

func fakeKey(pf string, index int) string { return fmt.Sprintf("%s/%d", pf, index) }

// defaultVF is a fresh VF's settings, as netdevsim reports them.
func defaultVF() vfState {
	f, auto, zero := false, uint32(0), uint32(0)
	return vfState{MAC: "00:00:00:00:00:00", VLAN: &vfVLAN{}, SpoofChk: &f, Trust: &f, LinkState: &auto, MinTxRate: &zero, MaxTxRate: &zero}
}

func (f fakeVFs) VF(pf string, index int) (vfState, error) {
	var out vfState
	err := f.update(func(d *fakeData) error {
		out = d.vf(pf, index)
		return nil
	})
	return out, err
}

func (f fakeVFs) SetVF(pf string, index int, s vfState) error {
	return f.update(func(d *fakeData) error {
		d.Calls++
		if d.FailFrom > 0 && d.Calls >= d.FailFrom {
			return errRefused{fmt.Errorf("set VF %d on PF %q: the driver is gone (fake)", index, pf)}
		}
		cur := d.vf(pf, index)
		for _, one := range s.settings() {
			if d.FailOn != "" && d.refuses(one, cur) {
				// Like a driver: what was set before the refusal stays set.
				return errRefused{fmt.Errorf("set %s of VF %d on PF %q: operation not supported (fake driver)", d.FailOn, index, pf)}
			}
			cur = cur.with(one)
			d.VFs[fakeKey(pf, index)] = cur
		}
		return nil
	})
}

// errRefused is a failure that leaves the settings made before it in place.
type errRefused struct{ error }

func (d *fakeData) vf(pf string, index int) vfState {
	if s, ok := d.VFs[fakeKey(pf, index)]; ok {
		return s
	}
	return defaultVF()
}

// refuses reports whether one (a single setting) changes the FailOn setting.
func (d *fakeData) refuses(one, cur vfState) bool {
	fields := map[string]bool{
		"mac": one.MAC != "", "vlan": one.VLAN != nil, "rate": one.MaxTxRate != nil || one.MinTxRate != nil,
		"spoofchk": one.SpoofChk != nil, "trust": one.Trust != nil, "linkState": one.LinkState != nil,
	}
	return fields[d.FailOn] && len(one.diff(cur)) > 0
}

// with returns s with o's set fields over it.
func (s vfState) with(o vfState) vfState {
	if o.MAC != "" {
		s.MAC = o.MAC
	}
	set(&s.VLAN, o.VLAN)
	set(&s.SpoofChk, o.SpoofChk)
	set(&s.Trust, o.Trust)
	set(&s.LinkState, o.LinkState)
	set(&s.MinTxRate, o.MinTxRate)
	set(&s.MaxTxRate, o.MaxTxRate)
	return s
}

func set[T any](dst **T, v *T) {
	if v != nil {
		c := *v
		*dst = &c
	}
}

// update runs fn on the file's data under an exclusive lock and writes the
// result back.
func (f fakeVFs) update(fn func(*fakeData) error) error {
	file, err := os.OpenFile(f.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer file.Close()
	if err := unix.Flock(int(file.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	d := &fakeData{}
	if st, _ := file.Stat(); st.Size() > 0 {
		if err := json.NewDecoder(file).Decode(d); err != nil {
			return fmt.Errorf("fake VFs %s: %w", f.path, err)
		}
	}
	if d.VFs == nil {
		d.VFs = map[string]vfState{}
	}
	fnErr := fn(d)
	if fnErr != nil && !errors.As(fnErr, new(errRefused)) {
		return fnErr
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := file.Truncate(0); err != nil {
		return err
	}
	if _, err := file.WriteAt(b, 0); err != nil {
		return err
	}
	return fnErr
}

// fakeFile creates the fake's file for a test, with its VFs preset.
func fakeFile(t *testing.T, preset map[string]vfState, failOn string) fakeVFs {
	t.Helper()
	f := fakeVFs{path: t.TempDir() + "/vfs.json"}
	err := f.update(func(d *fakeData) error {
		for k, v := range preset {
			d.VFs[k] = v
		}
		d.FailOn = failOn
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// failFrom makes every SetVF from call n on fail (0: none).
func (f fakeVFs) failFrom(t *testing.T, n int) {
	t.Helper()
	err := f.update(func(d *fakeData) error {
		d.FailFrom, d.Calls = n, 0
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
