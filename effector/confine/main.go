// jr2-confine runs one command of the Sandbox Effector confined by Landlock (decision 0070): the
// command may read and execute the paths it is given, read others, write beneath its own
// scratch directories, and nothing else; it cannot signal, ptrace (so read /proc/<pid>/environ of)
// or connect to the abstract sockets of any process outside its Landlock domain. Every process it
// leaves behind is killed before jr2-confine exits.
//
// Landlock's ptrace scoping guards another process's /proc/<pid>/environ, maps and auxv only from a
// command without CAP_SYS_ADMIN or CAP_PERFMON: recent kernels (6.18 here) let such a reader open
// them without the ptrace check. The Effector runs commands without capabilities, as the Sandbox
// pod's non-root user; as root the other guards (signals, /proc/<pid>/io, exe, mem) still hold.
//
// Why Go and not the Effector's Node: Node cannot call landlock(2) (no binding, and a Landlock domain
// must be entered by the process that then execs the command, which Node's spawn cannot do), and a
// static Go binary (CGO_ENABLED=0) runs in any image, whatever its libc. The Landlock calls go
// through github.com/landlock-lsm/go-landlock, the Landlock maintainers' Go library: it enforces on
// every OS thread of the Go runtime (TSYNC from ABI 8, its all-threads syscall before), sets
// no_new_privs, and knows which access rights each ABI version handles. It is used in strict mode
// for the ABI the kernel reports, never best-effort: where Landlock is missing (gVisor, a kernel
// without it, a seccomp profile that forbids it) jr2-confine refuses (exit 125) rather than run the
// command unconfined.
//
//	jr2-confine --probe
//	jr2-confine [--rx PATH]... [--ro PATH]... [--rw PATH]... [--cwd DIR] [--timeout SECONDS] [--report FILE] -- ARGV...
//
// The parent stays unconfined (it reads /proc to find what the command left behind), makes itself
// the child subreaper, and re-executes itself as the stage (`jr2-confine --stage <same flags>`) in a
// process group of its own; the stage enters the Landlock domain and execs ARGV. When ARGV's
// process ends, or the timeout passes, the parent kills the process group and then, until none is
// left, every process whose parent it is: orphans (daemons that setsid or fork twice) are
// reparented to it as the subreaper.
package main

import (
	"fmt"
	"os"
	"runtime"
)

// Exit codes of jr2-confine's own (the command's exit code passes through otherwise).
const (
	exitTimeout = 124 // --timeout passed
	exitFailure = 125 // jr2-confine's own failure: flags, Landlock, exec
	exitNoProbe = 3   // --probe: Landlock is not usable here
)

func init() {
	// The stage is started from the main OS thread, which stays: its parent-death signal (sent
	// when the thread that forked it ends) then fires only when jr2-confine itself ends.
	runtime.LockOSThread()
}

func main() {
	args := os.Args[1:]
	switch {
	case len(args) == 1 && args[0] == "--probe":
		os.Exit(probeMain())
	case len(args) == 1 && args[0] == probeStageFlag:
		os.Exit(probeStageMain())
	case len(args) >= 1 && args[0] == stageFlag:
		os.Exit(stageMain(args[1:]))
	default:
		os.Exit(parentMain(args))
	}
}

// fail prints jr2-confine's one line about its own failure.
func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "jr2-confine: "+format+"\n", a...)
}
