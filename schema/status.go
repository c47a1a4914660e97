package schema

import (
	"encoding/json"
	"fmt"

	"github.com/goccy/go-yaml"
)

// ClusterStatus is the status of a Cluster resource in operator mode: what
// the kubexm controller last observed of the cluster and did to it. It is
// not part of cluster.yaml; the CustomResourceDefinition (CRD) carries it as
// the status subresource.
type ClusterStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty" yaml:"observedGeneration,omitempty" doc:"The metadata.generation of the spec this status describes."`
	Phase              string             `json:"phase,omitempty" yaml:"phase,omitempty" enum:"Pending,Progressing,Ready,Degraded" doc:"Pending until the first run; Progressing while a run changes the cluster; Ready when the cluster matches the spec; Degraded when a run failed or the spec asks what cannot be applied (the conditions say why)."`
	Conditions         []Condition        `json:"conditions,omitempty" yaml:"conditions,omitempty" doc:"Ready, Progressing and Degraded, with the reason and a message."`
	KubernetesVersion  string             `json:"kubernetesVersion,omitempty" yaml:"kubernetesVersion,omitempty" doc:"The lowest kubelet version among the nodes."`
	ReadyNodes         string             `json:"readyNodes,omitempty" yaml:"readyNodes,omitempty" doc:"Ready nodes out of the nodes the spec names, as 2/3."`
	Nodes              []NodeStatus       `json:"nodes,omitempty" yaml:"nodes,omitempty" doc:"Each node the spec names, as the API server reports it."`
	Certificates       *CertificateStatus `json:"certificates,omitempty" yaml:"certificates,omitempty" doc:"When the cluster's certificates expire."`
	LastRun            *RunStatus         `json:"lastRun,omitempty" yaml:"lastRun,omitempty" doc:"The last playbook run against the cluster."`
	Settings           map[string]string  `json:"settings,omitempty" yaml:"settings,omitempty" doc:"The settings no run changes once the cluster exists (kubernetes.type, etcd.type, network.plugin, the pod and service ranges, the DNS domain, the control-plane domain), as the cluster record on the hosts holds them: a spec that asks another value is Degraded, nothing run."`
}

// Condition follows the Kubernetes API conventions for conditions.
type Condition struct {
	Type               string `json:"type" yaml:"type" enum:"Ready,Progressing,Degraded" doc:"What the condition is about."`
	Status             string `json:"status" yaml:"status" enum:"True,False,Unknown" doc:"Whether it holds."`
	ObservedGeneration int64  `json:"observedGeneration,omitempty" yaml:"observedGeneration,omitempty" doc:"The metadata.generation it was set for."`
	LastTransitionTime string `json:"lastTransitionTime,omitempty" yaml:"lastTransitionTime,omitempty" doc:"When status last changed (RFC 3339)."`
	Reason             string `json:"reason,omitempty" yaml:"reason,omitempty" doc:"A CamelCase word for programs."`
	Message            string `json:"message,omitempty" yaml:"message,omitempty" doc:"What a person needs to know, with the field or host it concerns."`
}

// NodeStatus is one node of the cluster.
type NodeStatus struct {
	Name              string   `json:"name" yaml:"name" doc:"The host's name in spec.hosts."`
	Roles             []string `json:"roles,omitempty" yaml:"roles,omitempty" doc:"Its role groups (etcd, master, worker...)."`
	KubernetesVersion string   `json:"kubernetesVersion,omitempty" yaml:"kubernetesVersion,omitempty" doc:"Its kubelet's version."`
	Ready             bool     `json:"ready" yaml:"ready" doc:"Whether its Ready condition is True."`
}

// CertificateStatus says when the cluster's certificates expire.
type CertificateStatus struct {
	EarliestExpiry string `json:"earliestExpiry,omitempty" yaml:"earliestExpiry,omitempty" doc:"The earliest notAfter of the leaf certificates (RFC 3339)."`
	CAExpiry       string `json:"caExpiry,omitempty" yaml:"caExpiry,omitempty" doc:"The earliest notAfter of the certificate authorities (RFC 3339)."`
}

// RunStatus is one playbook run against the cluster.
type RunStatus struct {
	ID         string `json:"id,omitempty" yaml:"id,omitempty" doc:"The run's id in its journal."`
	Playbook   string `json:"playbook,omitempty" yaml:"playbook,omitempty" doc:"The playbook it ran (create-cluster, upgrade, add-nodes...)."`
	Result     string `json:"result,omitempty" yaml:"result,omitempty" enum:"Succeeded,Failed,Interrupted" doc:"How it ended."`
	StartedAt  string `json:"startedAt,omitempty" yaml:"startedAt,omitempty" doc:"When it started (RFC 3339)."`
	FinishedAt string `json:"finishedAt,omitempty" yaml:"finishedAt,omitempty" doc:"When it ended (RFC 3339)."`
	Message    string `json:"message,omitempty" yaml:"message,omitempty" doc:"The failed task and host, when it failed."`
}

// DecodeStatus reads a Cluster object's status as the API server holds it
// (the decoded JSON of .status, nil for none) into the type, which names
// its fields with yaml tags as the CRD does.
func DecodeStatus(raw any) (ClusterStatus, error) {
	var st ClusterStatus
	if raw == nil {
		return st, nil
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return st, fmt.Errorf("status: %w", err)
	}
	if err := yaml.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("status: %w", err)
	}
	return st, nil
}
