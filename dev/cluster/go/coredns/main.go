// CoreDNS with only the plugins the local cluster's DNS uses, so the build skips the cloud
// providers' SDKs the stock binary links. It answers cluster.local (and <svc>.<ns>.svc, rewritten)
// for pods on the real node and for this machine, and forwards every other name upstream
// (docs/decisions/0040-real-node.md). hosts: the stand-in public host's names (node.sh's corefile;
// docs/decisions/0051).
package main

import (
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/rewrite"

	"github.com/coredns/coredns/coremain"
)

func main() { coremain.Run() }
