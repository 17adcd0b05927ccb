// The process that holds each pod's namespaces on the real node (the sandbox or "pause" container),
// made here because Kubernetes' own is C and no image can be pulled from outside this machine
// (docs/decisions/0040-real-node.md). Like it: sleep until SIGINT or SIGTERM, and as PID 1 of a
// pod that shares its process namespace, reap the orphans it inherits.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
