package lifecycle

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/mensylisir/kubexm/bundle"
	"github.com/mensylisir/kubexm/imagepush"
	"github.com/mensylisir/kubexm/schema"
)

// PushRequest is `kubexm artifact images push`: the cluster whose registry
// receives the images, and where the images come from.
type PushRequest struct {
	Inventory string
	// OfflineBundle, when set, is the bundle whose images are pushed
	// (verified and unpacked into the work directory); else the images a
	// run fetched into the work directory are.
	OfflineBundle string
	WorkDir       string
	// RolesPath is searched for roles; their support matrix checks the
	// cluster file.
	RolesPath []string
	// Jobs is how many images are pushed at once.
	Jobs int
}

// PushPlan is what a push sends and where.
type PushPlan struct {
	Target imagepush.Target
	Images []imagepush.Image
}

// PlanPush reads the cluster file of req and finds the registry it names
// and the images to push there. logf receives the bundle's messages.
func PlanPush(ctx context.Context, req PushRequest, logf func(format string, args ...any)) (*PushPlan, error) {
	s, err := SupportFromRolesPath(req.RolesPath)
	if err != nil {
		return nil, err
	}
	c, _, err := validate.LoadWith(req.Inventory, s)
	if err != nil {
		return nil, err
	}
	tgt, err := registryTarget(c)
	if err != nil {
		return nil, err
	}
	workDir := req.WorkDir
	if workDir == "" {
		workDir = DefaultWorkDir(c.Metadata.Name, req.Inventory)
	}
	if c.Spec.Registry.Type == "registry" {
		// The registry kubexm deploys presents a certificate of the
		// cluster CA: trusted through the CA's trust bundle in the work
		// directory, which holds both CAs while rotate-ca replaces it (the
		// registry's certificate moves to the new CA in its reissue phase).
		// In kubeadm mode that CA is kubeadm's, kept in certs/kubeadm
		// (roles/artifacts registry_ca_dir).
		caDir := filepath.Join("certs", "kubernetes")
		if c.Spec.Kubernetes.Type == "kubeadm" {
			caDir = filepath.Join("certs", "kubeadm")
		}
		tgt.Auth.CAFile = filepath.Join(workDir, caDir, "ca-bundle.crt")
	}
	p := &PushPlan{Target: tgt}
	if req.OfflineBundle != "" {
		dir, m, err := bundle.Open(ctx, req.OfflineBundle, workDir, logf)
		if err != nil {
			return nil, err
		}
		if p.Images, err = imagepush.FromBundle(dir, m); err != nil {
			return nil, fmt.Errorf("%s: %w", req.OfflineBundle, err)
		}
	} else if p.Images, err = imagepush.FromWorkDir(workDir); err != nil {
		return nil, err
	}
	return p, nil
}

// registryTarget is where cluster.yaml's registry settings send images.
func registryTarget(c *schema.Cluster) (imagepush.Target, error) {
	r := c.Spec.Registry
	if r.PrivateRegistry == "" {
		return imagepush.Target{}, fmt.Errorf("%s: spec.registry.privateRegistry is not set: name the registry to push to", c.File())
	}
	host := strings.SplitN(r.PrivateRegistry, "/", 2)[0]
	a := r.Auths[host]
	return imagepush.Target{
		Registry:  r.PrivateRegistry,
		Namespace: r.NamespaceOverride,
		Auth: imagepush.Auth{
			Username:      a.Username,
			Password:      a.Password,
			CertsDir:      c.RegistryCertsDir(host),
			SkipTLSVerify: a.SkipTLSVerify,
			PlainHTTP:     a.PlainHTTP,
		},
	}, nil
}
