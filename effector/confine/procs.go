package main

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one line of the process table: /proc/<pid>/stat's pid, state, ppid and process group.
type proc struct {
	pid, ppid, pgrp int
	state           byte
}

// parseStat reads /proc/<pid>/stat: `pid (comm) state ppid pgrp ...`, where comm may hold spaces
// and parentheses (so the fields after it are found from its last ')').
func parseStat(s string) (proc, bool) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 1 || end < open {
		return proc{}, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil {
		return proc{}, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return proc{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return proc{}, false
	}
	return proc{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0][0]}, true
}

// processes lists the live (not zombie) processes for which keep is true.
func processes(keep func(proc) bool) []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []proc
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		if p, ok := parseStat(string(b)); ok && p.state != 'Z' && p.state != 'X' && keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// sweeper ends what the command leaves behind and counts it.
type sweeper struct {
	self  int
	ended map[int]bool
}

// killGroup kills the command's process group, counting its live members other than skip. Called
// while the group's leader is unreaped (running, or a zombie waited with WNOWAIT), so the group's
// id cannot have been reused by an unrelated process.
func (s *sweeper) killGroup(pgid, skip int) {
	for _, p := range processes(func(p proc) bool { return p.pgrp == pgid && p.pid != skip }) {
		s.ended[p.pid] = true
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// killChildren kills every process whose parent is jr2-confine, the subreaper, and reaps, until it
// has no child left: a killed process's own children are reparented to it and found next round.
func (s *sweeper) killChildren() {
	for {
		for _, p := range processes(func(p proc) bool { return p.ppid == s.self }) {
			s.ended[p.pid] = true
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if errors.Is(err, syscall.ECHILD) {
				return
			}
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil || pid <= 0 {
				break // children remain, none ended yet
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}
