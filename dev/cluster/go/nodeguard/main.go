// jr2-node-guard: a chained CNI plugin (after bridge in the real node's conflist) that closes this
// node's own addresses to Sandbox pods (docs/decisions/0051, docs/decisions/0040-real-node.md).
//
// kube-network-policies polices a pod's traffic in POSTROUTING; a pod's connection to its own node
// goes PREROUTING -> INPUT and is never policed, so a Sandbox's egress policy cannot keep it from
// the node's API server port, kubelet or DNS. The node's nft table holds a set of Sandbox pods'
// IPv4 addresses and its input chain drops whatever such a pod originates towards the node. This
// plugin keeps the set: on ADD, for a pod carrying the annotation (containerd hands pod annotations
// to a plugin that declares the capability io.kubernetes.cri.pod-annotations), it adds the pod's
// address from prevResult before the pod's containers start; on DEL it removes it; on CHECK it says
// whether the set agrees. It fails closed: an ADD that cannot add the address fails, so the
// kubelet's RunPodSandbox fails and the pod never runs unguarded.
//
// Its configuration (the conflist entry; every field required):
//
//	{"type": "jr2-node-guard", "nft": "/usr/sbin/nft", "family": "inet", "table": "jr2-node",
//	 "set": "sandbox_pods", "annotation": "sandbox.jr2.dev/name",
//	 "capabilities": {"io.kubernetes.cri.pod-annotations": true}}
//
// Stdlib only; nft is run as a program.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

const annotationsCapability = "io.kubernetes.cri.pod-annotations"

var supportedVersions = []string{"0.4.0", "1.0.0", "1.1.0"}

type config struct {
	CNIVersion    string                     `json:"cniVersion"`
	Name          string                     `json:"name"`
	Nft           string                     `json:"nft"`
	Family        string                     `json:"family"`
	Table         string                     `json:"table"`
	Set           string                     `json:"set"`
	Annotation    string                     `json:"annotation"`
	PrevResult    json.RawMessage            `json:"prevResult,omitempty"`
	RuntimeConfig map[string]json.RawMessage `json:"runtimeConfig,omitempty"`
}

// cniError is the CNI error result (printed on stdout, exit status 1).
type cniError struct {
	CNIVersion string `json:"cniVersion"`
	Code       uint   `json:"code"`
	Msg        string `json:"msg"`
	Details    string `json:"details,omitempty"`
}

func (e *cniError) Error() string { return e.Msg + ": " + e.Details }

// Codes: 4 invalid configuration (the spec's), 7 invalid environment variables, 100+ this plugin's.
const (
	codeBadConfig = 4
	codeBadEnv    = 7
	codeNoAddress = 100
	codeNft       = 101
	codeCheck     = 102
)

func fail(code uint, msg, details string) *cniError {
	return &cniError{Code: code, Msg: msg, Details: details}
}

var identifier = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// parseConfig reads and validates the plugin's configuration.
func parseConfig(stdin []byte) (*config, error) {
	var c config
	if err := json.Unmarshal(stdin, &c); err != nil {
		return nil, fail(codeBadConfig, "jr2-node-guard: the network configuration is not JSON", err.Error())
	}
	for _, f := range []struct{ name, v string }{{"nft", c.Nft}, {"family", c.Family}, {"table", c.Table}, {"set", c.Set}, {"annotation", c.Annotation}} {
		if f.v == "" {
			return nil, fail(codeBadConfig, "jr2-node-guard: the plugin's configuration lacks "+f.name,
				"set plugins[].{nft,family,table,set,annotation} in the conflist (dev/cluster/node.sh cni_config)")
		}
	}
	if c.Family != "inet" && c.Family != "ip" {
		return nil, fail(codeBadConfig, "jr2-node-guard: family must be inet or ip", "got "+c.Family)
	}
	if !identifier.MatchString(c.Table) || !identifier.MatchString(c.Set) {
		return nil, fail(codeBadConfig, "jr2-node-guard: table and set must be nft identifiers", c.Table+" "+c.Set)
	}
	return &c, nil
}

// podAnnotations: the pod's annotations as containerd passed them, and whether it passed them at
// all (it passes the key, null for a pod without annotations, to a plugin declaring the capability).
func podAnnotations(c *config) (map[string]string, bool, error) {
	raw, ok := c.RuntimeConfig[annotationsCapability]
	if !ok {
		return nil, false, nil
	}
	var a map[string]string
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, true, fail(codeBadConfig, "jr2-node-guard: runtimeConfig."+annotationsCapability+" is not a string map", err.Error())
	}
	return a, true, nil
}

// prevAddresses: the addresses of the previous plugin's result (every result version this plugin
// accepts lists them as ips[].address, CIDR notation).
func prevAddresses(raw json.RawMessage) ([]netip.Addr, error) {
	var r struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fail(codeBadConfig, "jr2-node-guard: prevResult is not a CNI result", err.Error())
	}
	var out []netip.Addr
	for _, ip := range r.IPs {
		p, err := netip.ParsePrefix(ip.Address)
		if err != nil {
			return nil, fail(codeBadConfig, "jr2-node-guard: prevResult holds an address that is not CIDR", ip.Address)
		}
		out = append(out, p.Addr().Unmap())
	}
	return out, nil
}

type env struct {
	command, containerID, pod string
}

func readEnv() (env, error) {
	e := env{command: os.Getenv("CNI_COMMAND"), containerID: os.Getenv("CNI_CONTAINERID")}
	// K8S_POD_NAMESPACE and K8S_POD_NAME from CNI_ARGS, to name the pod in errors and logs.
	var ns, name string
	for _, kv := range strings.Split(os.Getenv("CNI_ARGS"), ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "K8S_POD_NAMESPACE":
			ns = v
		case "K8S_POD_NAME":
			name = v
		}
	}
	e.pod = "pod " + ns + "/" + name
	if ns == "" && name == "" {
		e.pod = "container " + e.containerID
	}
	if e.command == "" {
		return e, fail(codeBadEnv, "jr2-node-guard: CNI_COMMAND is not set", "run by a container runtime, not by hand")
	}
	return e, nil
}

// nft runs the nft program with a script on its stdin.
func nft(c *config, args []string, script string) (string, error) {
	cmd := exec.Command(c.Nft, args...)
	cmd.Stdin = strings.NewReader(script)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %v: %s", c.Nft, strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

func (c *config) setRef() string { return c.Family + " " + c.Table + " " + c.Set }

// elements: the set's IPv4 addresses, each with its comment (the container ID that added it).
func elements(c *config) (map[netip.Addr]string, error) {
	out, err := nft(c, []string{"-j", "list", "set", c.Family, c.Table, c.Set}, "")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Nftables []struct {
			Set *struct {
				Elem []json.RawMessage `json:"elem"`
			} `json:"set"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("nft -j list set: %v", err)
	}
	got := map[netip.Addr]string{}
	for _, o := range doc.Nftables {
		if o.Set == nil {
			continue
		}
		for _, raw := range o.Set.Elem {
			// An element is "10.244.255.5", or {"elem": {"val": "10.244.255.5", "comment": "..."}}.
			var s string
			if json.Unmarshal(raw, &s) == nil {
				if a, err := netip.ParseAddr(s); err == nil {
					got[a] = ""
				}
				continue
			}
			var e struct {
				Elem struct {
					Val     string `json:"val"`
					Comment string `json:"comment"`
				} `json:"elem"`
			}
			if json.Unmarshal(raw, &e) == nil {
				if a, err := netip.ParseAddr(e.Elem.Val); err == nil {
					got[a] = e.Elem.Comment
				}
			}
		}
	}
	return got, nil
}

// addScript adds addr (commented with the container ID, so a DEL without a cached result finds it).
func addScript(c *config, addr netip.Addr, containerID string) string {
	return fmt.Sprintf("add element %s { %s comment %q }\n", c.setRef(), addr, comment(containerID))
}

// removeScript removes addr whether or not it is there: add (a no-op when present) then delete, in
// one transaction (nft 1.0.6 has no "destroy").
func removeScript(c *config, addrs []netip.Addr) string {
	var b strings.Builder
	for _, a := range addrs {
		fmt.Fprintf(&b, "add element %s { %s }\ndelete element %s { %s }\n", c.setRef(), a, c.setRef(), a)
	}
	return b.String()
}

func comment(containerID string) string {
	if len(containerID) > 64 {
		return containerID[:64]
	}
	return containerID
}

func v4(addrs []netip.Addr) (v4s, others []netip.Addr) {
	for _, a := range addrs {
		if a.Is4() {
			v4s = append(v4s, a)
		} else {
			others = append(others, a)
		}
	}
	return
}

func cmdAdd(c *config, e env) error {
	if len(c.PrevResult) == 0 {
		return fail(codeBadConfig, "jr2-node-guard: no prevResult for "+e.pod,
			"the plugin is chained: list it after bridge in the conflist")
	}
	annotations, passed, err := podAnnotations(c)
	if err != nil {
		return err
	}
	if !passed {
		// Without the annotations there is no telling a Sandbox pod from another: refuse every pod.
		return fail(codeBadConfig, "jr2-node-guard: the runtime passed no pod annotations for "+e.pod,
			"declare capabilities {\""+annotationsCapability+"\": true} on this plugin; the runtime must support it (containerd does)")
	}
	addrs, err := prevAddresses(c.PrevResult)
	if err != nil {
		return err
	}
	v4s, others := v4(addrs)
	_, guarded := annotations[c.Annotation]
	if !guarded {
		// An address a Sandbox pod held before (its DEL lost, e.g. after a crash) is not kept from
		// the pod that gets it now.
		if len(v4s) > 0 {
			if _, err := nft(c, []string{"-f", "-"}, removeScript(c, v4s)); err != nil && !setMissing(c) {
				return fail(codeNft, "jr2-node-guard: could not clear "+e.pod+"'s address from the set "+c.setRef(), err.Error())
			}
		}
		return writeResult(c)
	}
	if len(others) > 0 {
		return fail(codeNoAddress, "jr2-node-guard: "+e.pod+" has an address the node guard does not cover: "+others[0].String(),
			"the guard's set is IPv4 only; the node's pod network must not give Sandbox pods IPv6")
	}
	if len(v4s) == 0 {
		return fail(codeNoAddress, "jr2-node-guard: prevResult gives "+e.pod+" no IPv4 address to guard", string(c.PrevResult))
	}
	var b strings.Builder
	for _, a := range v4s {
		b.WriteString(addScript(c, a, e.containerID))
	}
	if _, err := nft(c, []string{"-f", "-"}, b.String()); err != nil {
		return fail(codeNft, "jr2-node-guard: could not add "+e.pod+"'s address to "+c.setRef()+"; the pod is not started unguarded", err.Error())
	}
	fmt.Fprintf(os.Stderr, "jr2-node-guard: %s (%s) guarded: %v in %s\n", e.pod, c.Annotation, v4s, c.setRef())
	return writeResult(c)
}

// setMissing: the table or set does not exist (the node's network is down): nothing to remove.
func setMissing(c *config) bool {
	_, err := nft(c, []string{"list", "set", c.Family, c.Table, c.Set}, "")
	return err != nil
}

func cmdDel(c *config, e env) error {
	var v4s []netip.Addr
	if len(c.PrevResult) > 0 {
		addrs, err := prevAddresses(c.PrevResult)
		if err != nil {
			return err
		}
		v4s, _ = v4(addrs)
	}
	if setMissing(c) {
		return nil
	}
	// The addresses this container added, also when the runtime lost its cached result.
	have, err := elements(c)
	if err != nil {
		return fail(codeNft, "jr2-node-guard: could not list "+c.setRef()+" to remove "+e.pod, err.Error())
	}
	for a, owner := range have {
		if owner != "" && owner == comment(e.containerID) {
			v4s = append(v4s, a)
		}
	}
	if len(v4s) == 0 {
		return nil
	}
	if _, err := nft(c, []string{"-f", "-"}, removeScript(c, v4s)); err != nil {
		return fail(codeNft, "jr2-node-guard: could not remove "+e.pod+"'s address from "+c.setRef(), err.Error())
	}
	return nil
}

func cmdCheck(c *config, e env) error {
	if len(c.PrevResult) == 0 {
		return fail(codeBadConfig, "jr2-node-guard: no prevResult to check for "+e.pod, "")
	}
	annotations, passed, err := podAnnotations(c)
	if err != nil {
		return err
	}
	if !passed {
		return fail(codeBadConfig, "jr2-node-guard: the runtime passed no pod annotations for "+e.pod, "")
	}
	addrs, err := prevAddresses(c.PrevResult)
	if err != nil {
		return err
	}
	v4s, _ := v4(addrs)
	have, err := elements(c)
	if err != nil {
		return fail(codeNft, "jr2-node-guard: could not list "+c.setRef()+" to check "+e.pod, err.Error())
	}
	_, guarded := annotations[c.Annotation]
	for _, a := range v4s {
		if _, in := have[a]; in != guarded {
			want := "in"
			if !guarded {
				want = "not in"
			}
			return fail(codeCheck, fmt.Sprintf("jr2-node-guard: %s's address %s is %s %s", e.pod, a, map[bool]string{true: "in", false: "not in"}[in], c.setRef()),
				"it should be "+want+" it")
		}
	}
	return nil
}

// writeResult passes the previous plugin's result on, as a chained plugin does.
func writeResult(c *config) error {
	_, err := os.Stdout.Write(c.PrevResult)
	return err
}

func run(stdin []byte) error {
	e, err := readEnv()
	if err != nil {
		return err
	}
	if e.command == "VERSION" {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{"cniVersion": "1.0.0", "supportedVersions": supportedVersions})
	}
	c, err := parseConfig(stdin)
	if err != nil {
		return err
	}
	switch e.command {
	case "ADD":
		return cmdAdd(c, e)
	case "DEL":
		return cmdDel(c, e)
	case "CHECK":
		return cmdCheck(c, e)
	case "STATUS", "GC":
		// STATUS: ready whenever nft runs; GC: DEL removes what each pod added.
		if e.command == "STATUS" && setMissing(c) {
			return fail(codeNft, "jr2-node-guard: "+c.setRef()+" does not exist", "the node's network is not set up (dev/cluster/node.sh)")
		}
		return nil
	}
	return fail(codeBadEnv, "jr2-node-guard: unknown CNI_COMMAND "+e.command, "")
}

func main() {
	stdin, err := io.ReadAll(os.Stdin)
	if err == nil {
		err = run(stdin)
	}
	if err != nil {
		var ce *cniError
		if !errors.As(err, &ce) {
			ce = fail(999, "jr2-node-guard: "+err.Error(), "")
		}
		var v struct {
			CNIVersion string `json:"cniVersion"`
		}
		_ = json.Unmarshal(stdin, &v)
		ce.CNIVersion = v.CNIVersion
		if ce.CNIVersion == "" {
			ce.CNIVersion = "1.0.0"
		}
		_ = json.NewEncoder(os.Stdout).Encode(ce)
		fmt.Fprintln(os.Stderr, ce.Error())
		os.Exit(1)
	}
}
