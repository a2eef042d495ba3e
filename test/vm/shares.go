package vm

import (
	"path/filepath"
	"slices"
	"strings"
)

// flagKind says what a -test.* flag's value names.
type flagKind int

const (
	notPath    flagKind = iota
	outputFile          // a file, relative to -test.outputdir when that is set
	plainFile           // a file, relative to the working directory
	directory           // a directory, relative to the working directory
)

func kindOf(name string) flagKind {
	switch name {
	case "coverprofile", "cpuprofile", "memprofile", "blockprofile", "mutexprofile", "trace":
		return outputFile
	case "testlogfile":
		return plainFile
	case "outputdir", "gocoverdir", "fuzzcachedir":
		return directory
	}
	return notPath
}

// sharedDirs lists the host directories the program may write results to (coverage, profiles,
// -test.outputdir, $GOCOVERDIR), absolute against dir, without directories inside another one.
func sharedDirs(args, env []string, dir string) []string {
	flags := testFlags(args)
	outdir := dir
	if v := flags["outputdir"]; v != "" {
		outdir = absIn(dir, v)
	}
	var dirs []string
	for name, v := range flags {
		switch {
		case v == "":
		case kindOf(name) == directory:
			dirs = append(dirs, absIn(dir, v))
		case kindOf(name) == outputFile:
			dirs = append(dirs, filepath.Dir(absIn(outdir, v)))
		case kindOf(name) == plainFile:
			dirs = append(dirs, filepath.Dir(absIn(dir, v)))
		}
	}
	if v := lookupEnv(env, "GOCOVERDIR"); v != "" {
		dirs = append(dirs, absIn(dir, v))
	}
	return outermost(dirs)
}

func absIn(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// testFlags parses the -test.* flags that name paths the way the flag package accepts them:
// -test.x=v, --test.x=v and -test.x v.
func testFlags(args []string) map[string]string {
	flags := map[string]string{}
	for i := 0; i < len(args); i++ {
		if args[i] == "--" {
			break
		}
		a, dash := strings.CutPrefix(args[i], "-")
		name, ok := strings.CutPrefix(strings.TrimPrefix(a, "-"), "test.")
		if !dash || !ok {
			continue
		}
		if k, v, found := strings.Cut(name, "="); found {
			flags[k] = v
		} else if kindOf(name) != notPath && i+1 < len(args) {
			flags[name] = args[i+1]
			i++
		}
	}
	return flags
}

// lookupEnv returns the last value of name in env, as the environment's user would see it.
func lookupEnv(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// outermost sorts dirs and drops duplicates and directories below another listed directory.
func outermost(dirs []string) []string {
	slices.Sort(dirs)
	var out []string
	for _, d := range dirs {
		if !slices.ContainsFunc(out, func(o string) bool { return within(d, o) }) {
			out = append(out, d)
		}
	}
	return out
}

// within tells whether path is dir or below it.
func within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}
