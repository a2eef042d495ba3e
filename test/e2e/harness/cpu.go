package harness

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on Linux);
// maxTicks bounds a field so that two of them add up to a Duration.
const (
	clockTick = 10 * time.Millisecond
	maxTicks  = math.MaxInt64 / int64(clockTick) / 2
)

// CPUTimes is the CPU a process used: its own (user + system), and that of
// its children it has waited for (the CNI plugins netclass-dra runs, and
// the IPAM plugins they run in turn).
type CPUTimes struct {
	Self, Children time.Duration
}

// CPU reads the running daemon's CPU times.
func (d *DRA) CPU() (CPUTimes, error) {
	pid := d.PID()
	if pid == 0 {
		return CPUTimes{}, errors.New("netclass-dra is not running")
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return CPUTimes{}, err
	}
	return parseStatCPU(string(raw))
}

// parseStatCPU reads utime, stime, cutime and cstime (fields 14–17) of a
// /proc/PID/stat line. The command name (field 2) is in parentheses and may
// hold spaces and parentheses itself: the fields are counted after its
// last ')'.
func parseStatCPU(stat string) (CPUTimes, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return CPUTimes{}, fmt.Errorf("stat %q: no command name", stat)
	}
	f := strings.Fields(stat[end+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return CPUTimes{}, fmt.Errorf("stat %q: %d fields after the command name, want at least 15", stat, len(f))
	}
	var ticks [4]int64
	for i := range ticks {
		n, err := strconv.ParseInt(f[11+i], 10, 64)
		if err == nil && (n < 0 || n > maxTicks) {
			err = fmt.Errorf("%d ticks is out of range", n)
		}
		if err != nil {
			return CPUTimes{}, fmt.Errorf("stat field %d: %w", 14+i, err)
		}
		ticks[i] = n
	}
	return CPUTimes{Self: time.Duration(ticks[0]+ticks[1]) * clockTick, Children: time.Duration(ticks[2]+ticks[3]) * clockTick}, nil
}
