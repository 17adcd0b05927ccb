// jr2-probe: the one program in the real node tier's test image (test/node/). Run with no argument,
// it serves HTTP; the other commands are what a test runs in a pod with `kubectl exec`:
//
//	jr2-probe                      serve :8080 (GET / answers "ok <hostname>", /healthz the same)
//	jr2-probe serve PORT           the same on PORT (a stand-in for an Effector on :8082, an
//	                               Orchestrator on :8090, or a User Container's program)
//	jr2-probe get URL [CA_FILE]    GET URL (HTTPS checked against CA_FILE, with the pod's service
//	                               account token as bearer if CA_FILE is given); exit 0 on a 2xx
//	jr2-probe resolve NAME         print NAME's IPv4 addresses; exit 1 if it does not resolve
//	jr2-probe connect HOST:PORT    open a TCP connection and close it; print "connected", or exit 1
//	                               (a dropped connection says "i/o timeout")
//	jr2-probe write PATH           create PATH; exit 1 (printing why) if that fails
//	jr2-probe read PATH            print PATH's size in bytes (never its content); exit 1 if it
//	                               cannot be read
//	jr2-probe mounts               print /proc/self/mountinfo (how the runtime mounted this
//	                               container's root and volumes: a seat's read-only root is proven
//	                               by its options there)
//
// A timeout is 3 s, so a dropped connection fails fast and plainly.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

const tokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		serve("8080")
		return
	}
	if args[0] == "serve" && len(args) == 2 {
		serve(args[1])
		return
	}
	var err error
	switch {
	case args[0] == "get" && (len(args) == 2 || len(args) == 3):
		err = get(args[1], args[2:])
	case args[0] == "resolve" && len(args) == 2:
		err = resolve(args[1])
	case args[0] == "connect" && len(args) == 2:
		var c net.Conn
		if c, err = net.DialTimeout("tcp", args[1], 3*time.Second); err == nil {
			c.Close()
			fmt.Println("connected")
		}
	case args[0] == "write" && len(args) == 2:
		err = os.WriteFile(args[1], []byte("x"), 0o644)
	case args[0] == "mounts" && len(args) == 1:
		var b []byte
		if b, err = os.ReadFile("/proc/self/mountinfo"); err == nil {
			_, err = os.Stdout.Write(b)
		}
	case args[0] == "read" && len(args) == 2:
		var b []byte
		if b, err = os.ReadFile(args[1]); err == nil {
			fmt.Println(len(b))
		}
	default:
		err = fmt.Errorf("usage: jr2-probe [serve PORT | get URL [CA_FILE] | resolve NAME | connect HOST:PORT | write PATH | read PATH | mounts]")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func serve(port string) {
	host, _ := os.Hostname()
	answer := func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "ok %s\n", host) }
	http.HandleFunc("/", answer)
	srv := &http.Server{Addr: ":" + port, ReadHeaderTimeout: 3 * time.Second}
	fmt.Printf("jr2-probe serving :%s\n", port)
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func get(url string, caFile []string) error {
	client := &http.Client{Timeout: 3 * time.Second}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if len(caFile) == 1 {
		pem, err := os.ReadFile(caFile[0])
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("no certificate in %s", caFile[0])
		}
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
		token, err := os.ReadFile(tokenFile)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	fmt.Printf("%d %s\n", res.StatusCode, strings.TrimSpace(string(body)))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("%s answered %s", url, res.Status)
	}
	return nil
}

func resolve(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIP(ctx, "ip4", name)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		fmt.Println(a)
	}
	return nil
}
