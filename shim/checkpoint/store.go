package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

const (
	suffix     = ".json"
	tmpSuffix  = ".tmp"
	badSuffix  = ".corrupt"
	dirPerm    = 0o700
	recordPerm = 0o600
)

// Store holds the records of one directory, in memory and on disk. It is safe
// for concurrent use.
type Store struct {
	dir string

	mu     sync.Mutex
	claims map[types.UID][]byte // encoded records: every read decodes a private copy
	byPod  map[types.UID]map[types.UID]bool
	byName map[types.NamespacedName]map[types.UID]bool // a claim recreated under its name has two records for a while
}

// Open loads every record of dir (creating it). Leftover temporary files of an
// interrupted write are removed; records that do not decode are renamed
// *.corrupt and returned as errors, never silently dropped, and so are the
// records set aside by an earlier start: a caller must not garbage-collect
// attachments while Open reports any.
func Open(dir string) (*Store, []error) {
	s := &Store{dir: dir, claims: map[types.UID][]byte{}, byPod: map[types.UID]map[types.UID]bool{},
		byName: map[types.NamespacedName]map[types.UID]bool{}}
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return nil, []error{fmt.Errorf("create checkpoint directory %s: %w", dir, err)}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, []error{fmt.Errorf("read checkpoint directory %s: %w", dir, err)}
	}
	var problems []error
	for _, e := range entries {
		if err := s.load(e.Name()); err != nil {
			problems = append(problems, err)
		}
	}
	return s, problems
}

func (s *Store) load(name string) error {
	path := filepath.Join(s.dir, name)
	switch {
	case strings.HasSuffix(name, tmpSuffix):
		return removeIgnoringMissing(path)
	case strings.HasSuffix(name, badSuffix):
		// Set aside by an earlier start: still reported at every start, so
		// the daemon never garbage-collects what that record may describe.
		return fmt.Errorf("checkpoint %s was set aside earlier (unreadable); remove it once its attachments are dealt with", path)
	case !strings.HasSuffix(name, suffix):
		return nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	c, err := Decode(raw)
	if err == nil && string(c.UID)+suffix != name {
		err = fmt.Errorf("record of claim %s is stored as %s", c.UID, name)
	}
	if err != nil {
		if rerr := os.Rename(path, path+badSuffix); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("checkpoint %s set aside as %s%s: %w", path, name, badSuffix, err)
	}
	s.remember(c.UID, raw, c)
	return nil
}

// Get returns a private copy of a claim's record.
func (s *Store) Get(uid types.UID) (*Claim, bool) {
	s.mu.Lock()
	raw, ok := s.claims[uid]
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	c, err := Decode(raw)
	if err != nil { // cannot happen: only decodable records are kept
		return nil, false
	}
	return c, true
}

// Prepared returns the UIDs of the records of claims with that name (a
// claim deleted and created again under its name has two for a while),
// without decoding any record.
func (s *Store) Prepared(namespace, name string) []types.UID {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.byName[types.NamespacedName{Namespace: namespace, Name: name}]
	out := make([]types.UID, 0, len(set))
	for uid := range set {
		out = append(out, uid)
	}
	slices.Sort(out)
	return out
}

// List returns copies of every record, sorted by namespace and name.
func (s *Store) List() []*Claim {
	s.mu.Lock()
	uids := make([]types.UID, 0, len(s.claims))
	for uid := range s.claims {
		uids = append(uids, uid)
	}
	s.mu.Unlock()
	return s.getAll(uids)
}

// ForPod returns copies of the records of the claims reserved for a pod.
func (s *Store) ForPod(pod types.UID) []*Claim {
	s.mu.Lock()
	uids := make([]types.UID, 0, len(s.byPod[pod]))
	for uid := range s.byPod[pod] {
		uids = append(uids, uid)
	}
	s.mu.Unlock()
	return s.getAll(uids)
}

func (s *Store) getAll(uids []types.UID) []*Claim {
	out := make([]*Claim, 0, len(uids))
	for _, uid := range uids {
		if c, ok := s.Get(uid); ok {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Put writes a record atomically, then keeps it in memory.
func (s *Store) Put(c *Claim) error {
	raw, err := Encode(c)
	if err != nil {
		return err
	}
	if _, err := Decode(raw); err != nil {
		return fmt.Errorf("refusing to write an invalid record: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := writeAtomic(s.dir, string(c.UID)+suffix, raw); err != nil {
		return fmt.Errorf("checkpoint claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	s.forget(c.UID)
	s.remember(c.UID, raw, c)
	return nil
}

// Update applies fn to the current record of a claim and writes the result.
// fn runs under the store's lock, so it must be quick and must not call the store.
func (s *Store) Update(uid types.UID, fn func(*Claim) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, ok := s.claims[uid]
	if !ok {
		return fmt.Errorf("update checkpoint of claim %s: %w", uid, os.ErrNotExist)
	}
	c, err := Decode(raw)
	if err != nil {
		return err
	}
	if err := fn(c); err != nil {
		return err
	}
	if raw, err = Encode(c); err != nil {
		return err
	}
	if _, err := Decode(raw); err != nil {
		return fmt.Errorf("refusing to write an invalid record: %w", err)
	}
	if err := writeAtomic(s.dir, string(uid)+suffix, raw); err != nil {
		return fmt.Errorf("checkpoint claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	s.forget(uid)
	s.remember(uid, raw, c)
	return nil
}

// Delete removes a claim's record; a missing one is no error.
func (s *Store) Delete(uid types.UID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := removeIgnoringMissing(filepath.Join(s.dir, string(uid)+suffix)); err != nil {
		return fmt.Errorf("delete checkpoint of claim %s: %w", uid, err)
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("delete checkpoint of claim %s: %w", uid, err)
	}
	s.forget(uid)
	return nil
}

// remember and forget maintain the maps; the caller holds the lock (or owns s).
func (s *Store) remember(uid types.UID, raw []byte, c *Claim) {
	s.claims[uid] = raw
	name := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	if s.byName[name] == nil {
		s.byName[name] = map[types.UID]bool{}
	}
	s.byName[name][uid] = true
	for _, p := range c.Pods {
		if s.byPod[p.UID] == nil {
			s.byPod[p.UID] = map[types.UID]bool{}
		}
		s.byPod[p.UID][uid] = true
	}
}

func (s *Store) forget(uid types.UID) {
	delete(s.claims, uid)
	for name, set := range s.byName {
		delete(set, uid)
		if len(set) == 0 {
			delete(s.byName, name)
		}
	}
	for pod, set := range s.byPod {
		delete(set, uid)
		if len(set) == 0 {
			delete(s.byPod, pod)
		}
	}
}

// writeAtomic replaces dir/name with data so that a crash at any point leaves
// either the old file or the new one.
func writeAtomic(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, name+".*"+tmpSuffix)
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	tmp := f.Name()
	cleanup := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if _, err := f.Write(data); err != nil {
		return cleanup(fmt.Errorf("write %s: %w", tmp, err))
	}
	if err := f.Chmod(recordPerm); err != nil {
		return cleanup(fmt.Errorf("chmod %s: %w", tmp, err))
	}
	if err := f.Sync(); err != nil {
		return cleanup(fmt.Errorf("fsync %s: %w", tmp, err))
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

func removeIgnoringMissing(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
