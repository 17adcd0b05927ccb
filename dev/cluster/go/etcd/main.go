// Command etcd is etcd's own server entry point, built from the etcd server module at a pinned
// version. go install refuses go.etcd.io/etcd (its modules replace each other by relative path),
// so this tiny main stands in for etcd's own (docs/decisions/0002-local-control-plane.md).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
