package kube

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"github.com/mensylisir/kubexm/engine/transport"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// errNoKubeconfig says the kubeconfig is not on the host (yet): under
// --check on a cluster not created, nothing can be asked.
var errNoKubeconfig = errors.New("no kubeconfig")

// client is one API server's dynamic client and the kinds it serves.
type client struct {
	dyn dynamic.Interface
	// kube is the typed client of the same server, for what kubectl's
	// libraries take (drain) and raw GETs.
	kube   kubernetes.Interface
	mapper resettableMapper
	// server is the kubeconfig's API server, for messages.
	server string
	// target is the transport it dials through: a later run (a process
	// that runs many, such as a controller) has new transports and
	// replaces the entry, so the cache holds one client per host.
	target transport.Transport
}

// resettableMapper maps kinds to resources and can forget what it
// discovered (restmapper's deferred discovery mapper).
type resettableMapper interface {
	meta.RESTMapper
	Reset()
}

// clientKey names a cached client: the host and the kubeconfig's content,
// so a rewritten kubeconfig (new certificates, another server) gets a new
// client.
type clientKey struct {
	host string
	sum  [sha256.Size]byte
}

// clients caches the clients of a run: every task against one host's
// kubeconfig shares one connection (HTTP/2 over one SSH channel) and one
// discovery of the kinds served.
type clients struct {
	mu sync.Mutex
	m  map[clientKey]*client
	// connect makes a client (newClient; tests give a fake API server).
	connect func(kubeconfig []byte, target transport.Transport) (*client, error)
}

// get returns the client for the kubeconfig at path on target, reading the
// kubeconfig (as root) each time, connecting only the first time.
func (cs *clients) get(ctx context.Context, target transport.Transport, path string) (*client, error) {
	info, err := target.Stat(ctx, path, true)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if !info.Exists {
		return nil, fmt.Errorf("%w %s on %s", errNoKubeconfig, path, target.Host())
	}
	var buf bytes.Buffer
	if err := target.Get(ctx, path, &buf, true); err != nil {
		return nil, fmt.Errorf("read kubeconfig %s: %w", path, err)
	}
	key := clientKey{host: target.Host(), sum: sha256.Sum256(buf.Bytes())}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c := cs.m[key]; c != nil && c.target == target {
		return c, nil
	}
	connect := cs.connect
	if connect == nil {
		connect = newClient
	}
	c, err := connect(buf.Bytes(), target)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s on %s: %w", path, target.Host(), err)
	}
	if cs.m == nil {
		cs.m = map[clientKey]*client{}
	}
	cs.m[key] = c
	return c, nil
}

// newClient connects to the kubeconfig's API server. When the host's
// transport can dial (SSH: a direct-tcpip channel), every connection to the
// server is opened by the host, so the server needs to be reachable from
// the host only, as kubectl there would reach it.
func newClient(kubeconfig []byte, target transport.Transport) (*client, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	if d, ok := target.(transport.Dialer); ok {
		cfg.Dial = d.DialContext
	}
	cfg.UserAgent = "kubexm"
	// Many small requests in a burst (a manifest's objects, each read and
	// applied): client-go's default of 5 a second would pace them.
	cfg.QPS, cfg.Burst = 50, 100
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &client{
		dyn:    dyn,
		kube:   kube,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery())),
		server: cfg.Host,
		target: target,
	}, nil
}

// mapping finds the resource of a kind. A kind not in the cached discovery
// (a CRD applied a moment ago) makes it discover again, once.
func (c *client) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.mapper.Reset()
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("%s is not served by the API server: %w", gvk, err)
	}
	return m, nil
}

// resource returns the client of one object's resource, in namespace when
// the kind is namespaced (ns "" takes "default", as kubectl does).
func (c *client) resource(gvk schema.GroupVersionKind, ns string) (dynamic.ResourceInterface, bool, error) {
	m, err := c.mapping(gvk)
	if err != nil {
		return nil, false, err
	}
	r := c.dyn.Resource(m.Resource)
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return r, false, nil
	}
	if ns == "" {
		ns = "default"
	}
	return r.Namespace(ns), true, nil
}
