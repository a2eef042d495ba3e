package vm

// The host and the guest agent talk over the virtio-serial port named controlPort, one JSON
// document a line: the host sends a spec, the guest answers with a result once the program has
// exited, and the host acknowledges once it has read every byte the result counts, after which
// the guest powers off. Stdout and stderr travel on their own ports.
const (
	stdoutPort  = "netclass.stdout"
	stderrPort  = "netclass.stderr"
	controlPort = "netclass.control"
	ackLine     = "ack\n"
)

// spec is what the guest runs.
type spec struct {
	Path   string   // program, absolute
	Args   []string // arguments after the program
	Dir    string   // working directory
	Env    []string // complete environment
	Binds  []string // host directories under /tmp the guest must still see (program, Dir)
	Shares []share  // read-write 9p shares, mounted at their host path
}

type share struct {
	Tag  string
	Path string
}

// result is what happened.
type result struct {
	ExitCode int    // the program's exit status; 128+n when killed by signal n
	Stdout   int64  // bytes written to the stdout port
	Stderr   int64  // bytes written to the stderr port
	Error    string // the agent's own failure, if any
}
