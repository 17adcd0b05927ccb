package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

const (
	stageFlag      = "--stage"       // argv[1] of the confined stage
	probeStageFlag = "--probe-stage" // argv[1] of --probe's trial enforcement
	errorFD        = 3               // the stage's report of its own failure, close-on-exec
)

// presets are go-landlock's configurations, one per ABI version it knows (V1 at index 0): each
// handles every filesystem right, network right and IPC scope of its version.
var presets = []landlock.Config{
	landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6,
	landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11,
}

// abiVersion is the kernel's Landlock ABI version, or 0 and why it has none.
func abiVersion() (int, error) {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0, fmt.Errorf("landlock_create_ruleset: %w", err)
	}
	if v < 1 {
		return 0, fmt.Errorf("landlock_create_ruleset: ABI version %d", v)
	}
	return v, nil
}

// configFor is the strict configuration for a kernel of ABI abi: every filesystem right and
// IPC scope (signals, abstract UNIX sockets: ABI 6 on) of the newest version both know. Network
// rights stay unhandled, so TCP (and, from ABI 10, UDP) is not restricted by Landlock: the pod's
// NetworkPolicy and the egress proxy govern it. Strict, not best-effort: restricting fails rather
// than silently handling less than this ABI offers.
func configFor(abi int) (landlock.Config, error) {
	if abi < 1 {
		return landlock.Config{}, errors.New("no Landlock ABI")
	}
	p := presets[min(abi, len(presets))-1]
	return landlock.Config{HandledAccessFS: p.HandledAccessFS, Scoped: p.Scoped}, nil
}

// Access rights by what a flag grants; each is cut to what the config handles and, on a path that
// is not a directory, to the rights that apply to files.
const (
	readFile  = ll.AccessFSReadFile
	readDir   = ll.AccessFSReadFile | ll.AccessFSReadDir
	execute   = ll.AccessFSExecute
	writeFile = ll.AccessFSWriteFile | ll.AccessFSTruncate
	// Beneath --rw: read, execute (test binaries, tools installed there), write, create, remove, and
	// move or link within it ("refer", ABI 2 on). Not ioctl on devices, not connecting to pathname
	// UNIX sockets made outside the domain.
	readWrite = readDir | execute | writeFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
		ll.AccessFSMakeChar | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock |
		ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym | ll.AccessFSRefer
	fileRights = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSReadFile |
		ll.AccessFSIoctlDev
)

// Always granted: the devices ordinary tools open, and /proc to read (Landlock's ptrace scoping
// still keeps other domains' /proc/<pid>/environ and mem from the command).
var (
	alwaysDevices = []string{"/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"}
	alwaysProc    = "/proc"
)

type grant struct {
	path     string
	rights   uint64
	required bool // fail when missing (--rw); else a missing path is skipped
}

func grantsOf(o options) []grant {
	var gs []grant
	for _, p := range o.rx {
		gs = append(gs, grant{p, readDir | execute, false})
	}
	for _, p := range o.ro {
		gs = append(gs, grant{p, readDir, false})
	}
	for _, p := range o.rw {
		gs = append(gs, grant{p, readWrite, true})
	}
	for _, p := range alwaysDevices {
		gs = append(gs, grant{p, readFile | writeFile, false})
	}
	return append(gs, grant{alwaysProc, readDir, false})
}

// missing: the path, or a directory on its way, does not exist.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// rulesFor turns grants into Landlock rules for cfg, skipping missing optional paths.
func rulesFor(cfg landlock.Config, gs []grant) ([]landlock.Rule, error) {
	var rules []landlock.Rule
	for _, g := range gs {
		st, err := os.Stat(g.path)
		if err != nil {
			if missing(err) && !g.required {
				continue
			}
			return nil, err
		}
		rights := g.rights & uint64(cfg.HandledAccessFS)
		if !st.IsDir() {
			rights &= fileRights
		}
		if rights == 0 {
			continue
		}
		rules = append(rules, landlock.PathAccess(landlock.AccessFSSet(rights), g.path))
	}
	return rules, nil
}

// checkRequired: --rw paths and --cwd must exist (the parent says so before starting anything).
func checkRequired(o options) error {
	for _, p := range o.rw {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("--rw %s: %w", p, unwrapPath(err))
		}
	}
	if o.cwd != "" {
		st, err := os.Stat(o.cwd)
		if err != nil {
			return fmt.Errorf("--cwd %s: %w", o.cwd, unwrapPath(err))
		}
		if !st.IsDir() {
			return fmt.Errorf("--cwd %s: not a directory", o.cwd)
		}
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// stageMain is the confined stage: enter the Landlock domain, then exec ARGV. It reports its own
// failure on errorFD (the parent prints it) and exits 125; on success the exec closes errorFD.
func stageMain(args []string) int {
	syscall.CloseOnExec(errorFD)
	report := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		if _, err := syscall.Write(errorFD, []byte(msg)); err != nil {
			fail("%s", msg) // not started by the parent: say it here
		}
		return exitFailure
	}
	o, err := parseFlags(args)
	if err != nil {
		return report("%v", err)
	}
	// Looked up on the PATH of the command's own environment, before the domain hides directories.
	path := o.argv[0]
	if !strings.Contains(path, "/") {
		if path, err = exec.LookPath(path); err != nil {
			return report("exec %s: %v", o.argv[0], unwrapExec(err))
		}
	}
	abi, err := abiVersion()
	if err != nil {
		return report("Landlock is unavailable: %v", err)
	}
	cfg, err := configFor(abi)
	if err != nil {
		return report("Landlock is unavailable: %v", err)
	}
	rules, err := rulesFor(cfg, grantsOf(o))
	if err != nil {
		return report("%v", err)
	}
	// Sets no_new_privs on every thread and enters the domain (all threads).
	if err := cfg.Restrict(rules...); err != nil {
		return report("Landlock refused: %v", err)
	}
	err = syscall.Exec(path, o.argv, os.Environ())
	return report("exec %s: %v", o.argv[0], err)
}

func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// probeMain is `--probe`: the ABI version when Landlock can be entered here, else 0 and why.
func probeMain() int {
	abi, err := abiVersion()
	if err == nil {
		err = probeEnforce()
	}
	out := map[string]any{"abi": abi}
	code := 0
	if err != nil {
		out = map[string]any{"abi": 0, "error": err.Error()}
		code = exitNoProbe
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
	return code
}

// probeEnforce enters the strict domain in a throwaway child: a kernel (or a seccomp profile) may
// answer the version query yet refuse to create or enforce a ruleset.
func probeEnforce() error {
	cmd := exec.Command("/proc/self/exe", probeStageFlag)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return errors.New(strings.TrimPrefix(msg, "jr2-confine: "))
		}
		return fmt.Errorf("enforcing a ruleset: %w", err)
	}
	return nil
}

func probeStageMain() int {
	abi, err := abiVersion()
	if err == nil {
		var cfg landlock.Config
		if cfg, err = configFor(abi); err == nil {
			err = cfg.Restrict()
		}
	}
	if err != nil {
		fail("%v", err)
		return exitFailure
	}
	return 0
}
