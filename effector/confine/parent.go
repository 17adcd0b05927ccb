package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// report is what --report FILE holds once everything has ended.
type report struct {
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
	TimedOut bool    `json:"timedOut"`
	Ended    int     `json:"ended"`
	ABI      int     `json:"abi"`
	Error    *string `json:"error"`
}

// writeReport writes the report beside FILE and renames it there: a reader sees all of it or none.
func writeReport(path string, r report) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), fmt.Sprintf(".%s.%d.tmp", filepath.Base(path), os.Getpid()))
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// parentMain runs ARGV through the stage and ends everything it leaves; the exit code is ARGV's,
// 128+signal, 124 on timeout or 125 on jr2-confine's own failure.
func parentMain(args []string) int {
	r := report{}
	reportTo := reportPath(args)
	finish := func(code int) int {
		if reportTo != "" {
			if err := writeReport(reportTo, r); err != nil {
				fail("--report %s: %v", reportTo, err)
				if code != exitFailure {
					return exitFailure
				}
			}
		}
		return code
	}
	own := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		fail("%s", msg)
		r.Error = &msg
		return finish(exitFailure)
	}

	o, err := parseFlags(args)
	if err != nil {
		return own("%v", err)
	}
	if err := checkRequired(o); err != nil {
		return own("%v", err)
	}
	abi, err := abiVersion()
	r.ABI = abi
	if err != nil {
		return own("Landlock is unavailable: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return own("prctl(PR_SET_CHILD_SUBREAPER): %v", err)
	}

	// Signals that end jr2-confine end the command and all it started first.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	errR, errW, err := os.Pipe()
	if err != nil {
		return own("pipe: %v", err)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return own("%v", err)
	}
	dir := o.cwd
	if dir == "" {
		dir = "."
	}
	pid, err := syscall.ForkExec("/proc/self/exe", append([]string{"jr2-confine", stageFlag}, args...), &syscall.ProcAttr{
		Dir:   dir,
		Env:   os.Environ(),
		Files: []uintptr{devNull.Fd(), os.Stdout.Fd(), os.Stderr.Fd(), errW.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	_ = errW.Close()
	_ = devNull.Close()
	if err != nil {
		_ = errR.Close()
		return own("starting the confined stage: %v", err)
	}

	// The stage's own failure, if any: EOF with nothing when its exec succeeded.
	stageErr := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(errR)
		_ = errR.Close()
		stageErr <- string(b)
	}()
	// The command's end, without reaping it: its pid (and so its process group's id) stays taken
	// until the group is killed.
	exited := make(chan struct{})
	go func() {
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		close(exited)
	}()

	sw := &sweeper{self: os.Getpid(), ended: map[int]bool{}}
	var deadline <-chan time.Time
	if o.timeout > 0 {
		t := time.NewTimer(o.timeout)
		defer t.Stop()
		deadline = t.C
	}
	var endedBy os.Signal
	select {
	case <-exited:
		sw.killGroup(pid, pid)
	case <-deadline:
		r.TimedOut = true
		sw.killGroup(pid, 0)
	case endedBy = <-signals:
		sw.killGroup(pid, 0)
	}
	<-exited
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	sw.killChildren()
	r.Ended = len(sw.ended)
	if r.TimedOut {
		// On timeout "ended" counts all of them, the command too.
		sw.ended[pid] = true
		r.Ended = len(sw.ended)
	}

	switch {
	case ws.Exited():
		c := ws.ExitStatus()
		r.ExitCode = &c
	case ws.Signaled():
		s := unix.SignalName(ws.Signal())
		if s == "" {
			s = fmt.Sprintf("signal %d", int(ws.Signal()))
		}
		r.Signal = &s
	}
	if msg := <-stageErr; msg != "" {
		// The stage failed before exec: the exit code 125 is jr2-confine's, not the command's.
		r.ExitCode = nil
		return own("%s", msg)
	}
	switch {
	case endedBy != nil:
		msg := fmt.Sprintf("ended by %s: the command and all it started were killed", unix.SignalName(endedBy.(syscall.Signal)))
		fail("%s", msg)
		r.Error = &msg
		return finish(128 + int(endedBy.(syscall.Signal)))
	case r.TimedOut:
		return finish(exitTimeout)
	case r.ExitCode != nil:
		return finish(*r.ExitCode)
	case ws.Signaled():
		return finish(128 + int(ws.Signal()))
	}
	return own("the command ended in an unknown way: wait status %#x", uint32(ws))
}
