// Command probe is what the runner's own tests run inside the guest.
//
//	probe exit N              exit with status N
//	probe output NOUT NERR    NOUT lines "stdout %07d" on stdout, NERR "stderr %07d" on stderr, interleaved
//	probe whereami            a JSON report of the working directory, environment and /tmp
//	probe hang                never finish
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: probe exit|output|whereami|hang ..."))
	}
	switch os.Args[1] {
	case "exit":
		os.Exit(atoi(os.Args[2]))
	case "output":
		output(atoi(os.Args[2]), atoi(os.Args[3]))
	case "whereami":
		whereami()
	case "hang":
		time.Sleep(24 * time.Hour) // the guest must be killed long before this ends
	default:
		fail(fmt.Errorf("unknown command %q", os.Args[1]))
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fail(err)
	}
	return n
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "probe:", err)
	os.Exit(100)
}

func output(nout, nerr int) {
	out, errw := bufio.NewWriterSize(os.Stdout, 4096), bufio.NewWriterSize(os.Stderr, 4096)
	for i := 0; i < nout || i < nerr; i++ {
		if i < nout {
			fmt.Fprintf(out, "stdout %07d\n", i)
		}
		if i < nerr {
			fmt.Fprintf(errw, "stderr %07d\n", i)
		}
	}
	if err := out.Flush(); err != nil {
		fail(err)
	}
	if err := errw.Flush(); err != nil {
		fail(err)
	}
}

// Report is what whereami prints.
type Report struct {
	Dir    string
	Env    []string
	Marker string // contents of ./marker, written by the host
	UID    int
	TmpFS  bool // /tmp is a tmpfs
	TmpErr string
}

func whereami() {
	var r Report
	var err error
	if r.Dir, err = os.Getwd(); err != nil {
		fail(err)
	}
	r.Env, r.UID = os.Environ(), os.Getuid()
	if b, err := os.ReadFile("marker"); err == nil {
		r.Marker = string(b)
	}
	var st unix.Statfs_t
	r.TmpFS = unix.Statfs("/tmp", &st) == nil && st.Type == unix.TMPFS_MAGIC
	if f, err := os.CreateTemp("/tmp", "probe-"); err != nil {
		r.TmpErr = err.Error()
	} else {
		f.Close()
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fail(err)
	}
}
