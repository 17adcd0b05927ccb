package main

import (
	"reflect"
	"testing"
	"time"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"--rx", "/usr", "--ro=/work", "--ro", "/repos", "--rw", "/s", "--cwd", "/work",
		"--timeout", "1.5", "--report", "/r.json", "--", "sh", "-c", "--rx"})
	if err != nil {
		t.Fatal(err)
	}
	want := options{rx: []string{"/usr"}, ro: []string{"/work", "/repos"}, rw: []string{"/s"}, cwd: "/work",
		timeout: 1500 * time.Millisecond, report: "/r.json", argv: []string{"sh", "-c", "--rx"}}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("got %+v, want %+v", o, want)
	}
	for _, bad := range [][]string{
		{"sh"}, {"--rx", "/usr"}, {"--"}, {"--rx", "--", "sh"}, {"--timeout", "0", "--", "sh"},
		{"--timeout", "x", "--", "sh"}, {"--nope", "--", "sh"}, {"--ro=", "--", "sh"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}

func TestReportPath(t *testing.T) {
	cases := map[string][]string{
		"/r":  {"--rx", "/usr", "--report", "/r", "--bad"},
		"/r2": {"--report=/r2", "--"},
		"":    {"--rx", "--report", "--", "--report", "/x"},
	}
	for want, args := range cases {
		if got := reportPath(args); got != want {
			t.Errorf("reportPath(%q) = %q, want %q", args, got, want)
		}
	}
}

func TestParseStat(t *testing.T) {
	p, ok := parseStat("4242 (a (b) c) S 17 4242 4242 0 -1 4194560 ...")
	if !ok || p != (proc{pid: 4242, ppid: 17, pgrp: 4242, state: 'S'}) {
		t.Fatalf("got %+v %v", p, ok)
	}
	if _, ok := parseStat("garbage"); ok {
		t.Fatal("parsed garbage")
	}
}

func TestConfigFor(t *testing.T) {
	if _, err := configFor(0); err == nil {
		t.Fatal("ABI 0 gave a config")
	}
	v1, _ := configFor(1)
	if v1.Scoped != 0 || v1.HandledAccessNet != 0 || v1.HandledAccessFS&ll.AccessFSRefer != 0 {
		t.Fatalf("ABI 1: %v", v1)
	}
	v6, _ := configFor(6)
	if v6.Scoped != ll.ScopeSignal|ll.ScopeAbstractUnixSocket || v6.HandledAccessNet != 0 {
		t.Fatalf("ABI 6: %v", v6)
	}
	// A kernel newer than the library: the newest preset the library knows.
	if got, _ := configFor(99); got.HandledAccessFS != presets[len(presets)-1].HandledAccessFS {
		t.Fatalf("ABI 99: %v", got)
	}
}
