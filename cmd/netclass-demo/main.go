// Command netclass-demo runs the netclass demo scenario with no cluster:
// nodes and pods in network namespaces, real traffic, a table of what was
// verified. `make demo` runs it as root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/netclass-dev/netclass/conf/demo"
	"github.com/netclass-dev/netclass/demo/runner"
)

func main() {
	scenario := flag.String("scenario", "", "scenario file (default: the embedded one, conf/demo/scenario.json)")
	cniPath := flag.String("cni-path", "", "directory of the netclass and upstream plugin binaries")
	flag.Parse()
	if err := run(*scenario, *cniPath); err != nil {
		fmt.Fprintln(os.Stderr, "netclass-demo:", err)
		os.Exit(1)
	}
}

func run(file, cniPath string) error {
	data := demo.Default()
	if file != "" {
		var err error
		if data, err = os.ReadFile(file); err != nil {
			return err
		}
	}
	s, err := demo.Parse(data)
	if err != nil {
		return err
	}
	if cniPath == "" {
		return fmt.Errorf("--cni-path is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return (&runner.Runner{S: s, BinDir: cniPath, Out: os.Stdout}).Run(ctx)
}
