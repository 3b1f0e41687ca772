// stargz-snapshotter is the stargz snapshotter's daemon for the local stack (ci/local-stack.sh lazy),
// built offline from Debian's golang-github-containerd-stargz-snapshotter-dev, which ships the
// library but not upstream's cmd/containerd-stargz-grpc. It does what that daemon does through
// service.NewStargzSnapshotterService, joined by hand because the service package does not build
// here (its CRI parts import k8s.io/cri-api, which no Debian package provides):
//
//   - a FUSE filesystem (fs.NewFilesystem) under ROOT/stargz that mounts eStargz layers lazily,
//     fetching chunks by HTTP range requests; it finds a layer's registry from the snapshot labels
//     ctr-remote/containerd set (source.FromDefaultLabels), resolved by the hosts below;
//   - the overlay-based snapshotter (snapshot.NewSnapshotter, AsynchronousRemove as upstream)
//     under ROOT/snapshotter, which falls back to a normal unpack for a layer that is not eStargz;
//   - containerd's snapshot gRPC service (contrib/snapshotservice) on a unix socket, for a
//     containerd [proxy_plugins] entry.
//
// Left out, and why: the CRI source and keychains (no CRI here: the stack's containerd disables
// it), docker config/kubeconfig credentials (credentials come from -creds files only), the TOML
// config file (the defaults, plus the flags here), the IPFS mode, Prometheus metrics and the debug
// listener (nothing scrapes them).
//
// Registries: a host on loopback (127.0.0.1:PORT, localhost, ::1) is reached over plain HTTP, as
// upstream does (docker.MatchLocalhost), so the stack's plain-HTTP registries 127.0.0.1:15000 and
// :15002-15004 (and a test's proxy on any loopback port) need no flag; -plain-http names others.
// TLS works too: -tls HOST=CAFILE makes HOST https with that CA (the stack's public registry
// 127.0.0.1:15001 and its certs/ca.crt), and -creds HOST=USER:PASSWORDFILE sends basic/bearer
// credentials (the password is read from a file, never from argv).
//
// Signals, as upstream: SIGINT stops serving and closes the snapshotter, which unmounts every
// FUSE mount and removes every snapshot's directory (its metadata stays: start the next one on a
// fresh root, as ci/local-stack.sh lazy does); SIGTERM only stops serving, leaving the mounts for
// the next start on the same root to restore (it fetches their TOCs again from their registries).
//
// With -no-background-fetch a layer's bytes are fetched only when read (upstream's default
// also downloads every mounted layer in the background, a few seconds after the last read).
//
// usage:
//
//	stargz-snapshotter -root DIR -address SOCKET [-tls HOST=CAFILE]... [-creds HOST=USER:FILE]...
//	    [-plain-http HOST,...] [-no-background-fetch] [-log-level LEVEL]
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	golog "log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"github.com/containerd/containerd/contrib/snapshotservice"
	"github.com/containerd/containerd/log"
	"github.com/containerd/containerd/reference"
	"github.com/containerd/containerd/remotes/docker"
	"github.com/containerd/containerd/snapshots/overlay/overlayutils"
	stargzfs "github.com/containerd/stargz-snapshotter/fs"
	"github.com/containerd/stargz-snapshotter/fs/config"
	"github.com/containerd/stargz-snapshotter/fs/layer"
	"github.com/containerd/stargz-snapshotter/fs/source"
	snbase "github.com/containerd/stargz-snapshotter/snapshot"
	rhttp "github.com/hashicorp/go-retryablehttp"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
)

// pairs is a repeatable HOST=VALUE flag.
type pairs map[string]string

func (p pairs) String() string { return fmt.Sprint(map[string]string(p)) }
func (p pairs) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" || val == "" {
		return fmt.Errorf("want HOST=VALUE, got %q", v)
	}
	p[k] = val
	return nil
}

var (
	root      = flag.String("root", "/var/lib/containerd-stargz-grpc", "the snapshotter's root directory")
	address   = flag.String("address", "/run/containerd-stargz-grpc/containerd-stargz-grpc.sock", "the gRPC socket")
	plainHTTP = flag.String("plain-http", "", "comma-separated hosts reached over plain HTTP (loopback always is, unless -tls names it)")
	logLevel  = flag.String("log-level", "info", "logrus level")
	noBGFetch = flag.Bool("no-background-fetch", false, "fetch on demand only (upstream's no_background_fetch)")
	tlsCA     = pairs{}
	creds     = pairs{}
)

// hosts is the registry configuration upstream builds from its TOML [resolver] section
// (service/resolver.RegistryHostsFromConfig), made from the flags instead.
func hosts(plain map[string]bool) (source.RegistryHosts, error) {
	tlsClients := map[string]*http.Client{}
	for host, caFile := range tlsCA {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in %s", caFile)
		}
		tlsClients[host] = client(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	}
	secrets := map[string][2]string{}
	for host, v := range creds {
		user, file, ok := strings.Cut(v, ":")
		if !ok {
			return nil, fmt.Errorf("-creds %s: want USER:PASSWORDFILE", host)
		}
		pw, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		secrets[host] = [2]string{user, strings.TrimSpace(string(pw))}
	}
	plainClient := client(nil)
	return func(ref reference.Spec) ([]docker.RegistryHost, error) {
		host := ref.Hostname()
		c, isTLS := tlsClients[host]
		if !isTLS {
			c = plainClient
		}
		scheme := "https"
		if local, _ := docker.MatchLocalhost(host); (local || plain[host]) && !isTLS {
			scheme = "http"
		}
		auth := docker.NewDockerAuthorizer(docker.WithAuthClient(c), docker.WithAuthCreds(
			func(h string) (string, string, error) { s := secrets[h]; return s[0], s[1], nil }))
		return []docker.RegistryHost{{
			Client: c, Authorizer: auth, Host: host, Scheme: scheme, Path: "/v2",
			Capabilities: docker.HostCapabilityPull | docker.HostCapabilityResolve,
		}}, nil
	}, nil
}

// client retries transient failures as upstream's does (go-retryablehttp, 30 s per request).
func client(tlsConfig *tls.Config) *http.Client {
	rc := rhttp.NewClient()
	rc.Logger = nil
	if tlsConfig != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tlsConfig
		rc.HTTPClient.Transport = tr
	}
	c := rc.StandardClient()
	c.Timeout = 30 * time.Second
	return c
}

func main() {
	flag.Var(tlsCA, "tls", "HOST=CAFILE: reach HOST over https, trusting CAFILE (repeatable)")
	flag.Var(creds, "creds", "HOST=USER:PASSWORDFILE: credentials for HOST (repeatable)")
	flag.Parse()
	lvl, err := logrus.ParseLevel(*logLevel)
	if err != nil {
		golog.Fatalf("stargz-snapshotter: %v", err)
	}
	logrus.SetLevel(lvl)
	ctx := log.WithLogger(context.Background(), log.L)
	golog.SetOutput(log.G(ctx).WriterLevel(logrus.DebugLevel)) // go-fuse logs through the standard logger

	plain := map[string]bool{}
	for _, h := range strings.Split(*plainHTTP, ",") {
		if h = strings.TrimSpace(h); h != "" {
			plain[h] = true
		}
	}
	registryHosts, err := hosts(plain)
	if err != nil {
		log.G(ctx).WithError(err).Fatal("registry configuration")
	}

	// As NewStargzSnapshotterService: overlay's opaque xattr in the trusted namespace unless
	// the kernel needs the user one (rootless), then the filesystem and the snapshotter on it.
	snRoot, fsRoot := filepath.Join(*root, "snapshotter"), filepath.Join(*root, "stargz")
	if err := os.MkdirAll(snRoot, 0o700); err != nil {
		log.G(ctx).WithError(err).Fatal("root")
	}
	opaque := layer.OverlayOpaqueTrusted
	if userxattr, err := overlayutils.NeedsUserXAttr(snRoot); err == nil && userxattr {
		opaque = layer.OverlayOpaqueUser
	}
	fs, err := stargzfs.NewFilesystem(fsRoot, config.Config{NoPrometheus: true, NoBackgroundFetch: *noBGFetch},
		stargzfs.WithGetSources(source.FromDefaultLabels(registryHosts)),
		stargzfs.WithOverlayOpaqueType(opaque))
	if err != nil {
		log.G(ctx).WithError(err).Fatal("filesystem")
	}
	sn, err := snbase.NewSnapshotter(ctx, snRoot, fs, snbase.AsynchronousRemove)
	if err != nil {
		log.G(ctx).WithError(err).Fatal("snapshotter")
	}

	// As upstream's serve(): the snapshot service on a fresh unix socket.
	rpc := grpc.NewServer()
	snapshotsapi.RegisterSnapshotsServer(rpc, snapshotservice.FromSnapshotter(sn))
	if err := os.MkdirAll(filepath.Dir(*address), 0o700); err != nil {
		log.G(ctx).WithError(err).Fatal("socket directory")
	}
	if err := os.RemoveAll(*address); err != nil {
		log.G(ctx).WithError(err).Fatal("old socket")
	}
	l, err := net.Listen("unix", *address)
	if err != nil {
		log.G(ctx).WithError(err).Fatal("listen")
	}
	errCh := make(chan error, 1)
	go func() { errCh <- rpc.Serve(l) }()
	log.G(ctx).Infof("serving on %s (root %s)", *address, *root)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	var got os.Signal
	select {
	case got = <-sig:
		log.G(ctx).Infof("got %v", got)
	case err := <-errCh:
		log.G(ctx).WithError(err).Error("serve")
	}
	rpc.Stop()
	if got == syscall.SIGINT {
		if err := sn.Close(); err != nil {
			log.G(ctx).WithError(err).Warn("close")
		}
	}
	log.G(ctx).Info("exiting")
}
