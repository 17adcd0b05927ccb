// kube-network-policies (sigs.k8s.io/kube-network-policies, pinned in go.mod) enforcing NetworkPolicy
// on the local cluster's real node, run as a supervised host process beside the kubelet
// (docs/decisions/0040-real-node.md).
//
// Two differences from upstream's own main, both for this machine:
//   - It reads a kubeconfig (the host has no in-cluster service account).
//   - The packets of new connections are handed to its queue by a rule this program installs with the
//     xtables NFQUEUE target through nft_compat, in a table of its own (ip jr2-netpol). Upstream's rules use
//     nftables' native queue statement, which needs nft_queue; this machine's kernel is built without
//     it (CONFIG_NFT_QUEUE unset), so the batch holding upstream's rules fails to load and changes
//     nothing. The controller's packet verdicts, which are the policy engine, are upstream's, unchanged.
//     The rule is upstream's, for IPv4, with the node's pod CIDR in place of its set of pod IPs
//     (the same addresses: every pod on this node has its IP from that CIDR).
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

const tableName = "jr2-netpol"

func main() {
	var kubeconfig, nodeName, podCIDR string
	var queueID int
	flag.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (required)")
	flag.StringVar(&nodeName, "hostname-override", "", "name of the Node whose pods this enforces for (required)")
	flag.StringVar(&podCIDR, "pod-cidr", "", "the node's IPv4 pod CIDR (required)")
	flag.IntVar(&queueID, "nfqueue-id", 100, "number of the netfilter queue")
	klog.InitFlags(nil)
	flag.Parse()
	if kubeconfig == "" || nodeName == "" || podCIDR == "" {
		fmt.Fprintln(os.Stderr, "usage: netpol --kubeconfig FILE --hostname-override NODE --pod-cidr CIDR [--nfqueue-id N]")
		os.Exit(2)
	}
	_, cidr, err := net.ParseCIDR(podCIDR)
	if err != nil || cidr.IP.To4() == nil {
		klog.Fatalf("--pod-cidr %q is not an IPv4 CIDR", podCIDR)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		klog.Fatalf("reading %s: %v", kubeconfig, err)
	}
	config.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	config.ContentType = "application/vnd.kubernetes.protobuf"
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		klog.Fatalf("client: %v", err)
	}
	factory := informers.NewSharedInformerFactory(clientset, 0)
	controller, err := networkpolicy.NewController(
		clientset,
		factory.Networking().V1().NetworkPolicies(),
		factory.Core().V1().Namespaces(),
		factory.Core().V1().Pods(),
		nil, nil, nil, nil,
		networkpolicy.Config{
			QueueID:  queueID,
			NodeName: nodeName,
			// The conntrack race it works around is fixed in kernels 6.12+ (this one is newer).
			NetfilterBug1766Fix: false,
			// containerd tells it a new pod's IP over NRI before the API server knows it.
			NRIdisabled: false,
		},
	)
	if err != nil {
		klog.Fatalf("network policy controller: %v", err)
	}

	if err := installDiversion(cidr, uint16(queueID)); err != nil {
		klog.Fatalf("installing the nftables table %s: %v", tableName, err)
	}
	defer removeDiversion()

	done := make(chan error, 1)
	go func() { done <- controller.Run(ctx) }()
	factory.Start(ctx.Done())
	select {
	case <-ctx.Done():
		// Let the controller close its queue before the table that feeds it goes.
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	case err := <-done:
		if err != nil {
			klog.Errorf("controller stopped: %v", err)
		}
		removeDiversion()
		os.Exit(1)
	}
}

// installDiversion replaces table ip jr2-netpol with a postrouting chain (before source NAT, after
// destination NAT) that sends the first packet of each new connection from or to a pod of this
// node to the controller's queue. Established traffic and the node's own root processes (kubelet
// probes) pass, as upstream's rules let them.
func installDiversion(cidr *net.IPNet, queue uint16) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	table := &nftables.Table{Name: tableName, Family: nftables.TableFamilyIPv4}
	// add + delete + add: the batch replaces whatever an earlier run left.
	c.AddTable(table)
	c.DelTable(table)
	c.AddTable(table)
	chain := c.AddChain(&nftables.Chain{
		Name:     "postrouting",
		Table:    table,
		Type:     nftables.ChainTypeFilter,
		Hooknum:  nftables.ChainHookPostrouting,
		Priority: nftables.ChainPriorityRef(*nftables.ChainPriorityNATSource - 5),
	})
	rule := func(exprs ...expr.Any) { c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: exprs}) }
	accept := &expr.Verdict{Kind: expr.VerdictAccept}

	// meta skuid 0 accept
	rule(
		&expr.Meta{Key: expr.MetaKeySKUID, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0, 0, 0, 0}},
		accept,
	)
	// ct state established,related accept
	rule(
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}},
		accept,
	)
	// ip saddr <cidr> NFQUEUE; ip daddr <cidr> NFQUEUE (offsets 12 and 16 in the IPv4 header)
	for _, offset := range []uint32{12, 16} {
		rule(
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte(cidr.Mask), Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(cidr.IP.To4())},
			nfqueueTarget(queue),
		)
	}
	return c.Flush()
}

// nfqueueTarget is `-j NFQUEUE --queue-num N` (struct xt_NFQ_info_v3: queuenum, queues_total,
// flags, each a u16 in host order, padded to 8 bytes). No bypass flag: with no listener the packet
// is dropped, so policies fail closed, as upstream's default (--fail-open=false) does.
func nfqueueTarget(queue uint16) *expr.Target {
	info := make([]byte, 8)
	binary.NativeEndian.PutUint16(info[0:], queue)
	binary.NativeEndian.PutUint16(info[2:], 1)
	u := xt.Unknown(info)
	return &expr.Target{Name: "NFQUEUE", Rev: 3, Info: &u}
}

func removeDiversion() {
	c, err := nftables.New()
	if err != nil {
		return
	}
	c.DelTable(&nftables.Table{Name: tableName, Family: nftables.TableFamilyIPv4})
	_ = c.Flush()
}
