package guest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	netdevsimBus = "/sys/bus/netdevsim"
	// netdevsimFirstID is where Netdevsim starts looking for a free device id.
	netdevsimFirstID = 100
	netdevWait       = 10 * time.Second
)

// PF is a netdevsim device standing in for an SR-IOV physical function.
type PF struct {
	Name  string // the PF's netdev, in the namespace the device was created from
	ID    uint   // netdevsim device id (/sys/bus/netdevsim/devices/netdevsim<ID>)
	BusID string // "netdevsim<ID>"
	VFs   int    // VFs enabled
}

// SysfsDir is the device's directory in sysfs.
func (p PF) SysfsDir() string { return filepath.Join(netdevsimBus, "devices", p.BusID) }

// Netdevsim creates a netdevsim device with numVFs VFs enabled and returns its PF; the device
// is deleted when the test ends. It works only in the VM harness (make test-vm): netdevsim is
// built for the guest kernel and loaded from $NETCLASS_NETDEVSIM_KO.
func Netdevsim(t testing.TB, numVFs int) PF {
	t.Helper()
	if !InVM() {
		t.Fatalf("netdevsim: this test must run inside the VM harness (NETCLASS_VM=1 is unset): make test-vm")
	}
	if err := loadNetdevsim(); err != nil {
		t.Fatalf("netdevsim: %v", err)
	}
	pf, err := newNetdevsim()
	if err != nil {
		t.Fatalf("netdevsim: %v", err)
	}
	t.Cleanup(func() {
		if err := writeSysfs(filepath.Join(netdevsimBus, "del_device"), strconv.FormatUint(uint64(pf.ID), 10)); err != nil {
			t.Errorf("delete netdevsim device %s: %v", pf.BusID, err)
		}
	})
	if err := pf.enableVFs(numVFs); err != nil {
		t.Fatalf("netdevsim: %v", err)
	}
	return pf
}

func probeNetdevsim() error {
	if !InVM() {
		return errors.New("netdevsim is only loaded inside the VM harness")
	}
	return loadNetdevsim()
}

// loadNetdevsim loads psample and $NETCLASS_NETDEVSIM_KO unless netdevsim is already there.
func loadNetdevsim() error {
	if _, err := os.Stat(netdevsimBus); err == nil {
		return nil
	}
	ko := os.Getenv("NETCLASS_NETDEVSIM_KO")
	if ko == "" {
		return errors.New("NETCLASS_NETDEVSIM_KO is unset: the VM harness sets it to the netdevsim.ko that scripts/vm/setup.sh builds")
	}
	if out, err := exec.Command("modprobe", "psample").CombinedOutput(); err != nil {
		return fmt.Errorf("modprobe psample: %w: %s", err, strings.TrimSpace(string(out)))
	}
	out, err := exec.Command("insmod", ko).CombinedOutput()
	if _, statErr := os.Stat(netdevsimBus); statErr == nil {
		return nil // loaded, perhaps by a parallel test whose insmod won
	}
	return fmt.Errorf("insmod %s: %w: %s", ko, err, strings.TrimSpace(string(out)))
}

// newNetdevsim creates a one-port device under the first free id.
func newNetdevsim() (PF, error) {
	for id := uint(netdevsimFirstID); id < netdevsimFirstID+1000; id++ {
		err := writeSysfs(filepath.Join(netdevsimBus, "new_device"), fmt.Sprintf("%d 1", id))
		if errors.Is(err, syscall.EEXIST) {
			continue
		}
		if err != nil {
			return PF{}, fmt.Errorf("create device %d: %w", id, err)
		}
		pf := PF{ID: id, BusID: fmt.Sprintf("netdevsim%d", id)}
		pf.Name, err = pf.netdev()
		return pf, err
	}
	return PF{}, errors.New("no free netdevsim id")
}

// netdev waits (bounded) for the device's netdev to be registered and returns its name.
func (p PF) netdev() (string, error) {
	dir := filepath.Join(p.SysfsDir(), "net")
	deadline := time.Now().Add(netdevWait)
	for {
		entries, err := os.ReadDir(dir)
		if err == nil && len(entries) > 0 {
			return entries[0].Name(), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("device %s has no netdev in %s after %s: %v", p.BusID, dir, netdevWait, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *PF) enableVFs(n int) error {
	if n == 0 {
		return nil
	}
	if err := writeSysfs(filepath.Join(p.SysfsDir(), "sriov_numvfs"), strconv.Itoa(n)); err != nil {
		return fmt.Errorf("enable %d VFs on %s: %w", n, p.BusID, err)
	}
	p.VFs = n
	return nil
}

func writeSysfs(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, path, err)
	}
	return nil
}
