package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// options are the command line of a confined run, read alike by the parent and the stage.
type options struct {
	rx, ro, rw []string
	cwd        string
	timeout    time.Duration // 0: none
	report     string
	argv       []string
}

// parseFlags reads `[--rx PATH]... [--ro PATH]... [--rw PATH]... [--cwd DIR] [--timeout SECONDS]
// [--report FILE] -- ARGV...`; each flag also as --flag=VALUE. The `--` is required.
func parseFlags(args []string) (options, error) {
	var o options
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			o.argv = args[i+1:]
			if len(o.argv) == 0 {
				return o, errors.New("no command after --")
			}
			return o, nil
		}
		name, value, inline := strings.Cut(a, "=")
		switch name {
		case "--rx", "--ro", "--rw", "--cwd", "--timeout", "--report":
		default:
			return o, fmt.Errorf("unknown argument %q (usage: jr2-confine --probe | jr2-confine [--rx PATH]... [--ro PATH]... [--rw PATH]... [--cwd DIR] [--timeout SECONDS] [--report FILE] -- ARGV...)", a)
		}
		if !inline {
			if i+1 >= len(args) || args[i+1] == "--" {
				return o, fmt.Errorf("%s needs a value", name)
			}
			i++
			value = args[i]
		}
		if value == "" {
			return o, fmt.Errorf("%s needs a value", name)
		}
		switch name {
		case "--rx":
			o.rx = append(o.rx, value)
		case "--ro":
			o.ro = append(o.ro, value)
		case "--rw":
			o.rw = append(o.rw, value)
		case "--cwd":
			o.cwd = value
		case "--report":
			o.report = value
		case "--timeout":
			s, err := strconv.ParseFloat(value, 64)
			if err != nil || s <= 0 || math.IsInf(s, 0) || s > 365*24*3600 {
				return o, fmt.Errorf("--timeout %q: not a number of seconds above 0", value)
			}
			o.timeout = time.Duration(s * float64(time.Second))
		}
	}
	return o, errors.New("no -- and command (jr2-confine [flags] -- ARGV...)")
}

// reportPath finds --report in args that may not parse, so that a bad command line still writes
// its report when it names one.
func reportPath(args []string) string {
	path := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, value, inline := strings.Cut(a, "=")
		switch name {
		case "--rx", "--ro", "--rw", "--cwd", "--timeout", "--report":
			if !inline {
				if i+1 >= len(args) {
					return path
				}
				i++
				value = args[i]
			}
			if name == "--report" {
				path = value
			}
		}
	}
	return path
}
