// Gregor's kfake server: franz-go's in-process fake Kafka as a command.
//
// kfake's own main.go is not buildable as a command and listens on
// 127.0.0.1 only, so this program does the little a lab node needs: every
// broker of the cluster in this one process, listening on the node's
// address at the ports given, optionally keeping its state in a directory
// so that a killed process comes back with its data, and SASL users when a
// test needs a secured cluster. It prints one line per
// broker ("listening <host:port>") once all of them listen, and closes
// the cluster on SIGTERM or SIGINT.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

type users [][3]string

func (u *users) String() string { return "" }

func (u *users) Set(text string) error {
	parts := strings.SplitN(text, ":", 3)
	if len(parts) != 3 || parts[1] == "" {
		return fmt.Errorf("expected MECHANISM:USER:PASSWORD, got %q", text)
	}
	*u = append(*u, [3]string{parts[0], parts[1], parts[2]})
	return nil
}

type pairs map[string]string

func (p pairs) String() string { return "" }

func (p pairs) Set(text string) error {
	key, value, ok := strings.Cut(text, "=")
	if !ok || key == "" {
		return fmt.Errorf("expected key=value, got %q", text)
	}
	p[key] = value
	return nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1", "address every broker listens on and advertises")
	portList := flag.String("ports", "9092", "comma list of ports, one broker per port")
	clusterID := flag.String("cluster-id", "gregor-kfake", "cluster id the brokers report")
	dataDir := flag.String("data-dir", "", "directory that keeps the cluster's state across restarts")
	logLevel := flag.String("log-level", "warn", "none, error, warn, info or debug")
	configs := pairs{}
	flag.Var(configs, "broker-config", "broker setting key=value (repeatable)")
	var saslUsers users
	flag.Var(&saslUsers, "sasl-user", "MECHANISM:USER:PASSWORD of a superuser; any turns SASL on (repeatable)")
	flag.Parse()

	var ports []int
	for _, text := range strings.Split(*portList, ",") {
		port, err := strconv.Atoi(strings.TrimSpace(text))
		if err != nil || port <= 0 || port > 65535 {
			fmt.Fprintf(os.Stderr, "kfake: bad port %q in --ports\n", text)
			os.Exit(2)
		}
		ports = append(ports, port)
	}
	levels := map[string]kfake.LogLevel{"none": kfake.LogLevelNone, "error": kfake.LogLevelError,
		"warn": kfake.LogLevelWarn, "info": kfake.LogLevelInfo, "debug": kfake.LogLevelDebug}
	level, ok := levels[strings.ToLower(*logLevel)]
	if !ok {
		fmt.Fprintf(os.Stderr, "kfake: unknown --log-level %q\n", *logLevel)
		os.Exit(2)
	}

	host := *listen
	opts := []kfake.Opt{
		kfake.NumBrokers(len(ports)),
		kfake.Ports(ports...),
		kfake.ClusterID(*clusterID),
		kfake.WithLogger(kfake.BasicLogger(os.Stderr, level)),
		// kfake asks for 127.0.0.1:<port>; listen on the node's address at
		// that port instead, which is also the address the brokers advertise.
		kfake.ListenFn(func(network, address string) (net.Listener, error) {
			_, port, err := net.SplitHostPort(address)
			if err != nil {
				return nil, err
			}
			return net.Listen(network, net.JoinHostPort(host, port))
		}),
	}
	extra, err := optionalOpts(*dataDir, configs, saslUsers)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfake: %v\n", err)
		os.Exit(2)
	}
	cluster, err := kfake.NewCluster(append(opts, extra...)...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfake: cannot start the cluster: %v\n", err)
		os.Exit(1)
	}
	for _, addr := range cluster.ListenAddrs() {
		fmt.Printf("listening %s\n", addr)
	}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	<-signals
	cluster.Close()
}
