// Package attach is the CNI side every netclass plugin shares: the on-disk
// record of each attachment (what GC and DEL need when the kernel no longer
// tells), locks, IPAM delegation, results and CNI errors.
package attach

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// RecordVersion is the version of the record format this code writes. Records
// without a version (written before the field existed) have the same fields and
// are read as version 1; a record of a later version is refused, naming it,
// rather than half-understood.
const RecordVersion = 1

// Record describes one attachment of a network to a container. It is
// written before the first kernel object is created and removed after the
// last one is gone, so a crash between the two leaves something GC finds.
type Record struct {
	// Version is the record format's version (RecordVersion when written).
	Version     int    `json:"version,omitempty"`
	Network     string `json:"network"`
	Plugin      string `json:"plugin"`
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
	NetNS       string `json:"netns"`
	// HostIf is the host end of the pod's veth, when there is one.
	HostIf string `json:"hostIf,omitempty"`
	// Bridge is the host bridge the attachment is a port of, when any.
	Bridge string `json:"bridge,omitempty"`
	// Addresses are the pod's addresses (CIDR), for teardown steps that need
	// them once the pod's interface (or namespace) is gone.
	Addresses []string `json:"addresses,omitempty"`
	// MAC is the pod interface's, as the ADD's result reports it: netclass-dra's
	// agent keys the host's policy of a Multus attachment on it (never on what
	// the pod's own annotations say). Absent in records of earlier releases.
	MAC string `json:"mac,omitempty"`
	// Config is the plugin configuration the attachment was made with, for
	// GC's IPAM release and teardown without a caller-supplied config.
	Config json.RawMessage `json:"config,omitempty"`
	// Extra holds plugin-specific state (e.g. an SR-IOV VF's saved settings).
	Extra json.RawMessage `json:"extra,omitempty"`
}

// Key identifies the attachment, as in cni.dev/valid-attachments.
func (r *Record) Key() types.GCAttachment {
	return types.GCAttachment{ContainerID: r.ContainerID, IfName: r.IfName}
}

// Store keeps records under Dir/<network>/<containerID>.<ifname>.json.
type Store struct {
	Dir string
}

func (s Store) path(network, containerID, ifname string) (string, error) {
	for _, part := range []string{network, containerID, ifname} {
		if part == "" || part == "." || part == ".." || strings.ContainsAny(part, "/\x00") {
			return "", fmt.Errorf("invalid record key %q/%q/%q", network, containerID, ifname)
		}
	}
	return filepath.Join(s.Dir, network, containerID+"."+ifname+".json"), nil
}

// Put writes the record atomically (temporary file, rename). It is not
// fsynced: a record describes kernel objects (links, qdiscs, rules) that do
// not survive a reboot, so it only has to survive the death of a process,
// which the page cache guarantees. That saves an fsync per ADD.
func (s Store) Put(r *Record) error {
	p, err := s.path(r.Network, r.ContainerID, r.IfName)
	if err != nil {
		return err
	}
	r.Version = RecordVersion
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode record of %s/%s: %w", r.ContainerID, r.IfName, err)
	}
	return WriteFile(p, data)
}

// Get reads a record; a missing record returns (nil, nil).
func (s Store) Get(network, containerID, ifname string) (*Record, error) {
	p, err := s.path(network, containerID, ifname)
	if err != nil {
		return nil, err
	}
	return readRecord(p)
}

// Delete removes a record; a missing record is success. The network's
// directory goes with its last record: a node sees many networks come and
// go over its life (a tenant's Network is a directory on each node its pods
// used), and an empty directory of each would stay forever. rmdir removes
// only an empty directory, so a record written meanwhile keeps it, and
// whoever writes under the dataDir makes it again if it went just before
// its write (InDir).
func (s Store) Delete(network, containerID, ifname string) error {
	p, err := s.path(network, containerID, ifname)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove record %s: %w", p, err)
	}
	os.Remove(filepath.Dir(p)) // fails, and keeps it, unless it is empty
	return nil
}

// List returns every record of the network.
func (s Store) List(network string) ([]*Record, error) {
	dir := filepath.Join(s.Dir, network)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list records of network %q: %w", network, err)
	}
	var out []*Record
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		r, err := readRecord(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if r != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

func readRecord(p string) (*Record, error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read record %s: %w", p, err)
	}
	r := &Record{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("decode record %s: %w", p, err)
	}
	if r.Version > RecordVersion {
		return nil, fmt.Errorf("record %s has format version %d, written by a newer netclass; this plugin reads up to version %d", p, r.Version, RecordVersion)
	}
	r.Version = RecordVersion
	return r, nil
}

// WriteFile replaces path with data through a temporary file and a rename,
// so that readers see the old or the new content, never a torn file (not
// fsynced: see Put).
func WriteFile(path string, data []byte) error {
	f, err := createTemp(filepath.Dir(path))
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Close()); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rename %s to %s: %w", tmp, path, err)
	}
	return nil
}

// createTemp makes a temporary file in dir (see InDir). Once it is there,
// the directory is not empty and stays.
func createTemp(dir string) (*os.File, error) {
	var f *os.File
	err := InDir(dir, func() (err error) {
		f, err = os.CreateTemp(dir, ".tmp-*")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create temporary file in %s: %w", dir, err)
	}
	return f, nil
}

// InDir makes dir and runs create, which makes a file in it. Every writer
// under a dataDir goes through it: Store.Delete removes a network's
// directory with its last record when it is empty, and a network may bear
// the name of any directory there (locks, a bandwidth share's records), so
// a directory may go between its making and create. create is run again
// then, a few times at most (each time needs another last record deleted at
// that instant).
func InDir(dir string, create func() error) error {
	gone := func(err error) bool { return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrExist) }
	for attempt := 0; ; attempt++ {
		err := os.MkdirAll(dir, 0o700) // EEXIST: made by another, then removed before MkdirAll saw it
		if err == nil {
			err = create()
		}
		if gone(err) && attempt < 5 {
			continue
		}
		return err
	}
}

// Addressed puts the result's addresses and the pod interface's MAC on the record (once the ADD has
// them; store the record again after): DEL's teardown reads them, and so
// does netclass-dra's agent for the attachments Multus makes, whose
// policies need the pod's own addresses.
func (r *Record) Addressed(res *current.Result) {
	r.Addresses = r.Addresses[:0]
	for _, ipc := range res.IPs {
		r.Addresses = append(r.Addresses, ipc.Address.String())
	}
	r.MAC = ""
	for _, iface := range res.Interfaces {
		if iface != nil && iface.Sandbox != "" && iface.Name == r.IfName {
			r.MAC = iface.Mac
		}
	}
}

// IPNets parses the record's addresses; unparsable ones are skipped (a
// record is only ever written by netclass).
func (r *Record) IPNets() []*net.IPNet {
	var out []*net.IPNet
	for _, a := range r.Addresses {
		if ip, n, err := net.ParseCIDR(a); err == nil {
			n.IP = ip
			out = append(out, n)
		}
	}
	return out
}
