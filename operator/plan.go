// Package operator is kubexm's operator mode: a controller that reconciles
// the Cluster resource (deploy/crd, roles/cluster-resource) by running the
// same playbooks the CLI runs, through lifecycle.Runner. This file decides
// what a reconcile does (Decide); controller.go observes, runs and writes
// the status.
package operator

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/mensylisir/kubexm/schema"
)

// The annotations of a Cluster the controller reads.
const (
	// AnnotationPaused set to "true" stops every run until it is removed.
	AnnotationPaused = "kubexm.mensylisir.io/paused"
	// AnnotationRenewCertificates (any value) runs certs-renew once; the
	// controller removes it when the run succeeded.
	AnnotationRenewCertificates = "kubexm.mensylisir.io/renew-certificates"
	// AnnotationForceDelete set to "true" lets delete-nodes remove a node
	// that cannot be reached or drained (its -e force=true).
	AnnotationForceDelete = "kubexm.mensylisir.io/force-delete"
	// AnnotationCredentials names the Secret (namespace/name) holding what
	// the runs reach the hosts with: ssh-privatekey and/or password.
	AnnotationCredentials = "kubexm.mensylisir.io/credentials"
	// AnnotationAppliedSpec is the spec (JSON) of the last reconcile that
	// left the cluster as the spec said: what a removed host was, and which
	// fields changed since. Written by the controller.
	AnnotationAppliedSpec = "kubexm.mensylisir.io/applied-spec"
)

// Action is what a reconcile does.
type Action int

const (
	// Converged: the cluster is as the spec says; nothing runs.
	Converged Action = iota
	// Run a playbook.
	Run
	// Refuse: the spec asks what cannot be applied; nothing runs, the
	// cluster is Degraded with the reason.
	Refuse
	// Paused by the annotation; nothing runs.
	Paused
)

// Node is one Node of the API server.
type Node struct {
	KubeletVersion string
	Ready          bool
}

// Input is what a reconcile decides from.
type Input struct {
	// Spec is the Cluster's spec, loaded as a cluster.yaml (defaults
	// filled), and Groups its role groups with ranges expanded.
	Spec   *schema.Spec
	Groups map[string][]string
	// Applied is the spec of the last reconcile that converged (nil when
	// there is none) and AppliedGroups its groups.
	Applied       *schema.Spec
	AppliedGroups map[string][]string
	Annotations   map[string]string
	// Generation is the object's metadata.generation; Status its status.
	Generation int64
	Status     schema.ClusterStatus
	// Nodes are the API server's nodes by name.
	Nodes map[string]Node
	// Now is when the decision is made (the renewal window).
	Now time.Time

	// appliedFile is the applied spec's cluster file, for delete-nodes.
	appliedFile string
}

// Plan is a reconcile's decision.
type Plan struct {
	Action   Action
	Playbook string
	// Vars are the run's -e values besides the controller's own.
	Vars []string
	// OnApplied runs against the applied spec instead of the object's
	// (delete-nodes: the hosts removed from the spec are in it).
	OnApplied bool
	// Reason (CamelCase) and Message go to the conditions and the Event.
	Reason, Message string
}

// immutable are the settings no run changes once the cluster exists, by
// the key of the cluster record's settings (roles/identity
// identity_immutable), which the status holds.
var immutable = []struct {
	key   string
	value func(s *schema.Spec) string
}{
	{"kubernetes.type", func(s *schema.Spec) string { return s.Kubernetes.Type }},
	{"etcd.type", func(s *schema.Spec) string { return s.Etcd.Type }},
	{"network.plugin", func(s *schema.Spec) string { return s.Network.Plugin }},
	{"network.kubePodsCIDR", func(s *schema.Spec) string { return s.Network.KubePodsCIDR }},
	{"network.kubeServiceCIDR", func(s *schema.Spec) string { return s.Network.KubeServiceCIDR }},
	{"kubernetes.clusterName", func(s *schema.Spec) string { return s.Kubernetes.ClusterName }},
	{"controlPlaneEndpoint.domain", func(s *schema.Spec) string { return s.ControlPlaneEndpoint.Domain }},
}

// Decide is a reconcile's plan, one step at a time (the controller decides
// again after each run): the pause annotation; a changed immutable setting
// refuses everything; then hosts removed (delete-nodes), hosts added
// (add-nodes), kubernetes.version up (upgrade), the renewal annotation
// (certs-renew), and any other change of the spec since the last applied
// one (create-cluster, which applies every field and changes only what
// differs).
func Decide(in Input) Plan {
	if in.Annotations[AnnotationPaused] == "true" {
		return Plan{Action: Paused, Reason: "Paused", Message: "the " + AnnotationPaused + " annotation stops every run"}
	}
	if p, ok := changedImmutable(in); ok {
		return p
	}
	want := in.Groups["k8s_cluster"]
	if removed := removedHosts(in, want); len(removed) > 0 {
		if in.Applied == nil {
			return Plan{Action: Refuse, Reason: "RemovedHostUnknown", Message: fmt.Sprintf(
				"nodes %s are not in spec.hosts, but no applied spec says how to reach them: run `kubexm play delete-nodes -e nodes=%s` from the CLI with the cluster.yaml that has them",
				strings.Join(removed, ", "), strings.Join(removed, ","))}
		}
		vars := []string{"nodes=" + strings.Join(removed, ",")}
		if in.Annotations[AnnotationForceDelete] == "true" {
			vars = append(vars, "force=true")
		}
		return Plan{Action: Run, Playbook: "delete-nodes", Vars: vars, OnApplied: true, Reason: "RemovingNodes",
			Message: "hosts removed from spec.hosts: " + strings.Join(removed, ", ") + " (drained, then removed)"}
	}
	var added []string
	for _, h := range want {
		if _, ok := in.Nodes[h]; !ok {
			added = append(added, h)
		}
	}
	if len(added) > 0 {
		return Plan{Action: Run, Playbook: "add-nodes", Reason: "AddingNodes", Message: "hosts with no node yet: " + strings.Join(added, ", ")}
	}
	if p, ok := versionPlan(in, want); ok {
		return p
	}
	if _, ok := in.Annotations[AnnotationRenewCertificates]; ok {
		return Plan{Action: Run, Playbook: "certs-renew", Reason: "RenewingCertificates", Message: "the " + AnnotationRenewCertificates + " annotation asks for new certificates"}
	}
	if p, ok := renewalPlan(in); ok {
		return p
	}
	if in.Generation != in.Status.ObservedGeneration {
		if fields := otherChanges(in.Applied, in.Spec); in.Applied == nil || len(fields) > 0 {
			msg := "the spec changed since the last applied one: " + strings.Join(fields, ", ")
			if in.Applied == nil {
				msg = "the spec changed and no applied spec says which fields"
			}
			return Plan{Action: Run, Playbook: "create-cluster", Reason: "ApplyingSpec", Message: msg}
		}
	}
	return Plan{Action: Converged, Reason: "AsSpecified", Message: "the cluster is as the spec says"}
}

func changedImmutable(in Input) (Plan, bool) {
	var changed []string
	for _, f := range immutable {
		have := in.Status.Settings[f.key]
		if want := f.value(in.Spec); have != "" && want != have {
			changed = append(changed, fmt.Sprintf("%s is %s, the spec asks %s", f.key, have, want))
		}
	}
	if len(changed) == 0 {
		return Plan{}, false
	}
	return Plan{Action: Refuse, Reason: "ImmutableFieldChanged", Message: strings.Join(changed, "; ") +
		": no run changes it once the cluster exists (docs/guide.md, operator mode); put the value back"}, true
}

// removedHosts are the nodes the cluster has that the spec no longer names:
// those of the applied spec, or (with none) of the status, that are still
// nodes of the API server.
func removedHosts(in Input, want []string) []string {
	var had []string
	if in.Applied != nil {
		had = in.AppliedGroups["k8s_cluster"]
	} else {
		for _, n := range in.Status.Nodes {
			had = append(had, n.Name)
		}
	}
	var out []string
	for _, h := range had {
		if _, node := in.Nodes[h]; node && !slices.Contains(want, h) {
			out = append(out, h)
		}
	}
	return out
}

// RenewWithin is the renewal window: certificates that expire within it
// are renewed, as the masters' autoRenewCerts timer does.
const RenewWithin = 30 * 24 * time.Hour

// renewalPlan runs certs-renew when the status's earliest leaf certificate
// (roles/cluster-resource writes it after every run: the API server's)
// expires within RenewWithin; with spec.kubernetes.autoRenewCerts the
// masters' timer renews them and the controller leaves it. When the last
// run was a certs-renew that succeeded and the status still says so, it is
// refused instead of run again: something other than the run is wrong.
func renewalPlan(in Input) (Plan, bool) {
	c := in.Status.Certificates
	if in.Spec.Kubernetes.AutoRenewCerts || c == nil || in.Now.IsZero() {
		return Plan{}, false
	}
	at, err := time.Parse(time.RFC3339, c.EarliestExpiry)
	if err != nil || at.Sub(in.Now) > RenewWithin {
		return Plan{}, false
	}
	when := at.UTC().Format(time.RFC3339)
	if last := in.Status.LastRun; last != nil && last.Playbook == "certs-renew" && last.Result == "Succeeded" {
		return Plan{Action: Refuse, Reason: "CertificatesStillExpiring", Message: fmt.Sprintf(
			"certs-renew run %s succeeded, yet the status still says a certificate expires at %s: check the masters' certificates with `kubexm certs check`, then annotate %s to renew again",
			last.ID, when, AnnotationRenewCertificates)}, true
	}
	return Plan{Action: Run, Playbook: "certs-renew", Reason: "CertificatesExpiring", Message: fmt.Sprintf(
		"a certificate expires at %s, within %d days", when, int(RenewWithin.Hours()/24))}, true
}

// versionPlan compares spec.kubernetes.version with the lowest kubelet of
// the spec's nodes: a patch or one minor up is an upgrade; down, or more
// than one minor up, is refused.
func versionPlan(in Input, hosts []string) (Plan, bool) {
	want, err := semver.NewVersion(in.Spec.Kubernetes.Version)
	if err != nil {
		return Plan{Action: Refuse, Reason: "InvalidVersion", Message: fmt.Sprintf("spec.kubernetes.version %q: %v", in.Spec.Kubernetes.Version, err)}, true
	}
	var low *semver.Version
	for _, h := range hosts {
		if v, err := semver.NewVersion(in.Nodes[h].KubeletVersion); err == nil && (low == nil || v.LessThan(low)) {
			low = v
		}
	}
	switch {
	case low == nil || want.Equal(low):
		return Plan{}, false
	case want.LessThan(low):
		return Plan{Action: Refuse, Reason: "VersionDowngrade", Message: fmt.Sprintf(
			"spec.kubernetes.version %s is below the nodes' v%s: kubexm does not downgrade", in.Spec.Kubernetes.Version, low)}, true
	case want.Major() != low.Major() || want.Minor() > low.Minor()+1:
		return Plan{Action: Refuse, Reason: "VersionSkew", Message: fmt.Sprintf(
			"spec.kubernetes.version %s is more than one minor above the nodes' v%s: upgrade one minor at a time", in.Spec.Kubernetes.Version, low)}, true
	}
	return Plan{Action: Run, Playbook: "upgrade", Reason: "Upgrading", Message: fmt.Sprintf("nodes at v%s, the spec asks %s", low, in.Spec.Kubernetes.Version)}, true
}

// otherChanges are the spec's top-level fields that differ from the applied
// spec's, besides those Decide plans on its own (hosts, role groups,
// kubernetes.version) and spec.operator.
func otherChanges(applied, spec *schema.Spec) []string {
	if applied == nil {
		return nil
	}
	a, s := *applied, *spec
	a.Hosts, s.Hosts = nil, nil
	a.RoleGroups, s.RoleGroups = schema.RoleGroups{}, schema.RoleGroups{}
	a.Kubernetes.Version, s.Kubernetes.Version = "", ""
	// spec.operator is the controller itself (roles/kubexm-controller):
	// create-cluster from the CLI installs or removes it; a run of the
	// controller would replace the pod it runs in.
	a.Operator, s.Operator = schema.Operator{}, schema.Operator{}
	var out []string
	av, sv := reflect.ValueOf(a), reflect.ValueOf(s)
	for i := range av.NumField() {
		if !reflect.DeepEqual(av.Field(i).Interface(), sv.Field(i).Interface()) {
			name, _, _ := strings.Cut(av.Type().Field(i).Tag.Get("yaml"), ",")
			out = append(out, name)
		}
	}
	return out
}
