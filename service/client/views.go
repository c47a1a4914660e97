package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/mensylisir/kubexm/clusterview"
	"github.com/mensylisir/kubexm/service/jobstore"
)

// The read requests of the CLI's verbs with --server: each names its
// route here, so that the verbs only print what comes back.

// Jobs lists the server's jobs, of cluster and in status when set.
func (c *Client) Jobs(ctx context.Context, cluster, status string) ([]jobstore.Job, error) {
	q := url.Values{}
	if cluster != "" {
		q.Set("cluster", cluster)
	}
	if status != "" {
		q.Set("status", status)
	}
	var out struct {
		Jobs []jobstore.Job `json:"jobs"`
	}
	err := c.Get(ctx, "/api/v1/jobs", q, &out)
	return out.Jobs, err
}

// Job is the job id.
func (c *Client) Job(ctx context.Context, id string) (jobstore.Job, error) {
	var j jobstore.Job
	err := c.Get(ctx, "/api/v1/jobs/"+url.PathEscape(id), nil, &j)
	return j, err
}

// JobEvents are the stored events of the job id.
func (c *Client) JobEvents(ctx context.Context, id string) ([]jobstore.Event, error) {
	var evs struct {
		Events []jobstore.Event `json:"events"`
	}
	err := c.Get(ctx, "/api/v1/jobs/"+url.PathEscape(id)+"/events", nil, &evs)
	return evs.Events, err
}

// ClusterStates are the states of the work directories of the clusters
// registered on the server.
func (c *Client) ClusterStates(ctx context.Context) ([]clusterview.State, error) {
	var out struct {
		Clusters []struct {
			State clusterview.State `json:"state"`
		} `json:"clusters"`
	}
	if err := c.Get(ctx, "/api/v1/clusters", url.Values{"state": {"true"}}, &out); err != nil {
		return nil, err
	}
	states := make([]clusterview.State, 0, len(out.Clusters))
	for _, cl := range out.Clusters {
		states = append(states, cl.State)
	}
	return states, nil
}

// ClusterList is the clusters registered on the server of Client, as get
// clusters --server shows them.
type ClusterList struct{ Client *Client }

// Clusters are the states of their work directories on the server.
func (l ClusterList) Clusters(ctx context.Context) ([]clusterview.State, error) {
	return l.Client.ClusterStates(ctx)
}

// None says no cluster is registered on the server.
func (l ClusterList) None() string {
	base := l.Client.Base.Redacted()
	return fmt.Sprintf("no clusters registered on %s (kubexm create cluster -f cluster.yaml --server %s registers one)", base, base)
}

// Nodes are the hosts and nodes of the registered cluster, as get nodes
// shows them.
func (c *Client) Nodes(ctx context.Context, cluster string) ([]clusterview.NodeRow, error) {
	var rows []clusterview.NodeRow
	err := c.Get(ctx, clusterPath(cluster, "nodes"), nil, &rows)
	return rows, err
}

// Describe is describe cluster of the registered cluster.
func (c *Client) Describe(ctx context.Context, cluster string) (*clusterview.Description, error) {
	var d clusterview.Description
	if err := c.Get(ctx, clusterPath(cluster, "describe"), nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// View is the registered cluster Cluster as the server sees it (its
// registered config, its work directory there); File is the cluster file
// named here, for the hints, as the verbs with --server register it.
type View struct {
	Client        *Client
	Cluster, File string
}

// Nodes are the hosts and nodes of the cluster.
func (v View) Nodes(ctx context.Context) ([]clusterview.NodeRow, error) {
	return v.Client.Nodes(ctx, v.Cluster)
}

// Describe is describe cluster of the cluster.
func (v View) Describe(ctx context.Context) (*clusterview.Description, error) {
	d, err := v.Client.Describe(ctx, v.Cluster)
	if err != nil {
		return nil, err
	}
	d.File = v.File
	return d, nil
}

// ClusterItems lists what the server keeps of the registered cluster
// under route (backups, bundles); never nil.
func ClusterItems[T any](ctx context.Context, c *Client, cluster, route string) ([]T, error) {
	var out map[string][]T
	if err := c.Get(ctx, clusterPath(cluster, route), nil, &out); err != nil {
		return nil, err
	}
	if items := out[route]; items != nil {
		return items, nil
	}
	return []T{}, nil
}

// DownloadBackup writes the backup name of cluster to the new file to
// (default: name in this directory), checked against the size and sha256
// the server gives; it returns the file, the size and the sha256.
func (c *Client) DownloadBackup(ctx context.Context, cluster, name, to string) (string, int64, string, error) {
	if to == "" {
		to = filepath.Base(name)
	}
	if _, err := os.Lstat(to); err == nil {
		return "", 0, "", fmt.Errorf("%s exists: remove it or give another --to", to)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", 0, "", err
	}
	n, sum, err := c.Download(ctx, clusterPath(cluster, "backups")+"/"+url.PathEscape(name), to)
	return to, n, sum, err
}

// DeleteBundle deletes the offline bundle sum of cluster, and returns the
// sha256 the server deleted.
func (c *Client) DeleteBundle(ctx context.Context, cluster, sum string) (string, error) {
	var out struct {
		Deleted string `json:"deleted"`
	}
	err := c.Do(ctx, c.HTTP, http.MethodDelete, clusterPath(cluster, "bundles")+"/"+url.PathEscape(sum), "", nil, http.StatusOK, &out)
	return out.Deleted, err
}

func clusterPath(cluster, route string) string {
	return "/api/v1/clusters/" + url.PathEscape(cluster) + "/" + route
}
