package operator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mensylisir/kubexm/inventory"
)

// The keys of the credentials Secret: those of Kubernetes' ssh-auth and
// basic-auth Secret types.
const (
	secretKeyPrivateKey = corev1.SSHAuthPrivateKey
	secretKeyPassword   = corev1.BasicAuthPasswordKey
)

// credentials are what a run reaches the hosts with, from the Secret the
// Cluster names: never in the object, its status or the cluster file of the
// run, only in the run's inventory (and the key in a file of its own,
// removed after the run).
type credentials struct {
	keyFile  string
	password string
}

// credentialsNamespace is the namespace of the Secret the Cluster names
// ("" when it names none).
func credentialsNamespace(obj *unstructured.Unstructured) string {
	ns, _, _ := strings.Cut(obj.GetAnnotations()[AnnotationCredentials], "/")
	return ns
}

// keyFile is the name of the run's SSH key in the cluster's work
// directory: the same path in every run, since the path is part of the
// inventory a resumed run must share with the run it resumes.
const keyFile = "controller-ssh-key"

func (r *Reconciler) credentials(ctx context.Context, obj *unstructured.Unstructured, workDir string) (*credentials, error) {
	ref := obj.GetAnnotations()[AnnotationCredentials]
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("the Cluster names no credentials: annotate it with %s=<namespace>/<secret> (a Secret with %s and/or %s)", AnnotationCredentials, secretKeyPrivateKey, secretKeyPassword)
	}
	var s corev1.Secret
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		return nil, fmt.Errorf("the credentials Secret %s: %w", ref, err)
	}
	c := &credentials{password: string(s.Data[secretKeyPassword])}
	if key := s.Data[secretKeyPrivateKey]; len(key) > 0 {
		path := filepath.Join(workDir, keyFile)
		// Never through a link someone left there.
		os.Remove(path)
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
		_, werr := f.Write(key)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path)
			return nil, fmt.Errorf("credentials: %w", werr)
		}
		c.keyFile = path
	}
	if c.keyFile == "" && c.password == "" {
		return nil, fmt.Errorf("the credentials Secret %s has neither %s nor %s", ref, secretKeyPrivateKey, secretKeyPassword)
	}
	return c, nil
}

// apply gives every remote host of inv the credentials.
func (c *credentials) apply(inv *inventory.Inventory) {
	for i := range inv.Hosts {
		h := &inv.Hosts[i]
		if h.Local {
			continue
		}
		if c.keyFile != "" {
			h.PrivateKeyPath = c.keyFile
			if h.Bastion != nil {
				h.Bastion.PrivateKeyPath = c.keyFile
			}
		}
		if c.password != "" {
			h.Password, h.BecomePassword = c.password, c.password
		}
	}
}

func (c *credentials) remove() {
	if c.keyFile != "" {
		os.Remove(c.keyFile)
	}
}
