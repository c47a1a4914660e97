package clusterview

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	kxschema "github.com/mensylisir/kubexm/schema"
)

// clustersResource is the Cluster resource of operator mode
// (roles/cluster-resource installs its CRD).
var clustersResource = schema.GroupVersionResource{
	Group: strings.Split(kxschema.APIVersion, "/")[0], Version: strings.Split(kxschema.APIVersion, "/")[1], Resource: "clusters",
}

// Resource is the Cluster resource of a cluster as its API server holds it.
type Resource struct {
	Generation int64                  `json:"generation"`
	Paused     bool                   `json:"paused,omitempty"`
	Status     kxschema.ClusterStatus `json:"status"`
}

// errNoResource is a cluster without its Cluster resource (or without the
// CRD): one made before operator mode, or by create-cluster with
// --skip-tags cluster-resource.
var errNoResource = errors.New("none in the cluster (create-cluster puts it there: operator mode, docs/guide.md section 12)")

// askResource reads the Cluster named name through the admin kubeconfig.
func askResource(ctx context.Context, kubeconfig, name string) (*Resource, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kubeconfig, err)
	}
	obj, err := dc.Resource(clustersResource).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, errNoResource
	}
	if err != nil {
		return nil, fmt.Errorf("the Cluster %s: %w", name, err)
	}
	st, err := kxschema.DecodeStatus(obj.Object["status"])
	if err != nil {
		return nil, fmt.Errorf("the Cluster %s: %w", name, err)
	}
	return &Resource{Generation: obj.GetGeneration(), Paused: obj.GetAnnotations()["kubexm.mensylisir.io/paused"] == "true", Status: st}, nil
}

// phase is what get clusters shows of a Cluster resource: its phase, with
// a spec not yet observed marked.
func (r *Resource) phase() string {
	p := r.Status.Phase
	if p == "" {
		p = "Pending"
	}
	if r.Paused {
		p += ",Paused"
	}
	if r.Status.ObservedGeneration != r.Generation {
		p += fmt.Sprintf(" (generation %d not observed)", r.Generation)
	}
	return p
}

// resourceWait bounds get clusters' question to each cluster: the table
// must not wait on a cluster that does not answer.
const resourceWait = 3 * time.Second

// AskResources fills each state's Resource column from its cluster's API
// server (the work directory's admin kubeconfig), all clusters at once,
// each question bounded: "-" without a kubeconfig or a Cluster resource,
// "no answer" for an API server that did not answer in time.
func AskResources(ctx context.Context, states []State) {
	var wg sync.WaitGroup
	for i := range states {
		s := &states[i]
		if !s.Kubeconfig {
			s.Resource = "-"
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, resourceWait)
			defer cancel()
			r, err := askResource(ctx, filepath.Join(s.WorkDir, "kubeconfig"), s.Name)
			switch {
			case errors.Is(err, errNoResource):
				s.Resource = "-"
			case err != nil:
				s.Resource = "no answer"
			default:
				s.Resource = r.phase()
			}
		})
	}
	wg.Wait()
}
