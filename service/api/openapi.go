package api

import (
	"strings"
)

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

func jsonBody(schema map[string]any) map[string]any {
	return map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": schema}}}
}

func resp(desc string, schema map[string]any) map[string]any {
	r := map[string]any{"description": desc}
	if schema != nil {
		r["content"] = map[string]any{"application/json": map[string]any{"schema": schema}}
	}
	return r
}

func listOf(key, item string) map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{key: map[string]any{"type": "array", "items": ref(item)}}}
}

var errResponses = map[string]any{
	"401": resp("no, unknown or expired bearer token", ref("Error")),
	"403": resp("the token's role does not allow this", ref("Error")),
	"404": resp("no such cluster or job", ref("Error")),
}

func op(summary string, responses map[string]any, extra map[string]any) map[string]any {
	rs := map[string]any{}
	for k, v := range errResponses {
		rs[k] = v
	}
	for k, v := range responses {
		rs[k] = v
	}
	o := map[string]any{"summary": summary, "responses": rs, "security": []any{map[string]any{"bearer": []any{}}}}
	for k, v := range extra {
		o[k] = v
	}
	return o
}

func pathParam(name, desc string, typ string) map[string]any {
	return map[string]any{"name": name, "in": "path", "required": true, "description": desc, "schema": map[string]any{"type": typ}}
}

func queryParam(name, desc string, typ string) map[string]any {
	return map[string]any{"name": name, "in": "query", "required": false, "description": desc, "schema": map[string]any{"type": typ}}
}

func obj(props map[string]any, required ...string) map[string]any {
	o := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

func (s *Server) routes() []route {
	str := map[string]any{"type": "string"}
	clusterName := pathParam("name", "the cluster's metadata.name", "string")
	jobID := pathParam("id", "the job id", "string")
	afterParam := queryParam("after", "only events with an id above this one (or the Last-Event-ID header)", "integer")
	return []route{
		{"GET", "/api/v1/clusters", RoleReadOnly, s.listClusters, op("List the registered clusters; with ?state=true each with its work directory's state (kubexm get clusters)",
			map[string]any{"200": resp("the clusters", listOf("clusters", "Cluster"))},
			map[string]any{"parameters": []any{queryParam("state", "true: add each cluster's work directory state (last run, kubeconfig, CA expiry) as state", "boolean")}})},
		{"POST", "/api/v1/clusters", RoleOperator, s.registerCluster, op("Register a cluster.yaml (a new version when the cluster exists); with ?run=PLAYBOOK also queue a job",
			map[string]any{
				"201": resp("registered", ref("ClusterVersion")),
				"202": resp("registered and a job queued (with ?run)", ref("JobAccepted")),
				"400": resp("the cluster.yaml is not valid (file:line:col of each problem)", ref("Error")),
				"409": resp("the cluster already has an active job (with ?run)", ref("Conflict")),
			}, map[string]any{
				"parameters":  []any{queryParam("run", "a playbook to queue on the cluster at once, e.g. create-cluster", "string")},
				"requestBody": map[string]any{"required": true, "content": map[string]any{"application/yaml": map[string]any{"schema": map[string]any{"type": "string", "description": "the cluster.yaml"}}}},
			})},
		{"GET", "/api/v1/clusters/{name}", RoleReadOnly, s.getCluster, op("Get a cluster and its newest config (secrets masked)",
			map[string]any{"200": resp("the cluster", map[string]any{"type": "object", "properties": map[string]any{"cluster": ref("Cluster"), "config": map[string]any{"type": "string"}}})},
			map[string]any{"parameters": []any{clusterName}})},
		{"GET", "/api/v1/clusters/{name}/versions", RoleReadOnly, s.clusterVersions, op("List the versions of a cluster's config, newest first (secrets masked)",
			map[string]any{"200": resp("the versions", listOf("versions", "ClusterVersion"))},
			map[string]any{"parameters": []any{clusterName}})},
		{"GET", "/api/v1/clusters/{name}/versions/{version}", RoleReadOnly, s.clusterVersion, op("Get one version of a cluster's config (secrets masked)",
			map[string]any{"200": resp("the version", ref("ClusterVersion")), "400": resp("not a version number", ref("Error"))},
			map[string]any{"parameters": []any{clusterName, pathParam("version", "the config version, from 1", "integer")}})},
		{"POST", "/api/v1/clusters/{name}/bundles", RoleOperator, s.uploadBundle, op("Upload an offline bundle (the .tar.gz or .tar.zst of kubexm artifact export, told apart by its first bytes) for a cluster: checked against ?sha256= and its manifest before anything of it is unpacked, then unpacked in its work directory and stored; a job names it by sha256 in options.offline_bundle",
			map[string]any{
				"201": resp("stored and verified", ref("Bundle")),
				"400": resp("not a valid bundle, or not the sha256 given (what is wrong with it); nothing stored", ref("Error")),
				"413": resp("larger than the server's limit", ref("Error")),
				"507": resp("no room for it in the data directory beside the uploads in progress", ref("Error")),
			}, map[string]any{
				"parameters": []any{clusterName, queryParam("sha256", "the bundle's sha256 (64 lower-case hex digits, its .sha256 file): the body must have it", "string")},
				"requestBody": map[string]any{"required": true, "content": map[string]any{
					"application/gzip": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}},
					"application/zstd": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}},
			})},
		{"GET", "/api/v1/clusters/{name}/bundles", RoleReadOnly, s.listBundles, op("List the offline bundles uploaded for a cluster, newest first",
			map[string]any{"200": resp("the bundles", listOf("bundles", "Bundle"))},
			map[string]any{"parameters": []any{clusterName}})},
		{"DELETE", "/api/v1/clusters/{name}/bundles/{sha256}", RoleOperator, s.deleteBundle, op("Delete an uploaded offline bundle and its unpacked copy; refused while a queued, running or interrupted job names it (whichever server on the database queued the job)",
			map[string]any{
				"200": resp("deleted", obj(map[string]any{"deleted": str})),
				"400": resp("not a sha256", ref("Error")),
				"404": resp("no such cluster, or no such bundle of it", ref("Error")),
				"409": resp("an active job uses the bundle, named in the answer", ref("Conflict")),
			}, map[string]any{"parameters": []any{clusterName, pathParam("sha256", "the bundle's sha256, as the upload answered", "string")}})},
		{"GET", "/api/v1/clusters/{name}/backups", RoleReadOnly, s.listBackups, op("List the backups a backup job made of the cluster on the server, newest first; a restore job names one in options.backup",
			map[string]any{"200": resp("the backups", listOf("backups", "Backup"))},
			map[string]any{"parameters": []any{clusterName}})},
		{"GET", "/api/v1/clusters/{name}/backups/{backup}", RoleOperator, s.downloadBackup, op("Download a backup archive (it holds etcd's data and the CA keys: operator tokens only, every download audited); X-Kubexm-Sha256 carries its sha256, Range requests continue a broken download",
			map[string]any{
				"200": map[string]any{"description": "the archive", "headers": map[string]any{"X-Kubexm-Sha256": map[string]any{"description": "sha256 of the archive, hex", "schema": str}},
					"content": map[string]any{"application/gzip": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}},
				"206": resp("the part asked with Range", nil),
				"400": resp("not the name of a backup archive", ref("Error")),
			}, map[string]any{"parameters": []any{clusterName, pathParam("backup", "the archive's name, as listed", "string")}})},
		{"GET", "/api/v1/clusters/{name}/nodes", RoleReadOnly, s.clusterNodes, op("kubexm get nodes: the hosts of the newest config beside the Node objects the cluster's API server reports (asked with the server's admin kubeconfig of the cluster); secrets masked",
			map[string]any{"200": resp("one row per host or node", map[string]any{"type": "array", "items": ref("NodeRow")}), "502": resp("the cluster's API server did not answer, or there is no admin kubeconfig yet", ref("Error"))},
			map[string]any{"parameters": []any{clusterName}})},
		{"GET", "/api/v1/clusters/{name}/describe", RoleReadOnly, s.describeCluster, op("kubexm describe cluster: versions, hosts, endpoint, the work directory's runs and certificates, and the nodes; secrets masked",
			map[string]any{"200": resp("the description, as describe cluster -o json prints it", map[string]any{"type": "object"}), "502": resp("the description could not be made", ref("Error"))},
			map[string]any{"parameters": []any{clusterName}})},
		{"GET", "/api/v1/clusters/{name}/certs-report", RoleReadOnly, s.certsReport, op("The report of the cluster's last certs-check job (roles/certs' certs_report_path); Last-Modified says when it was written",
			map[string]any{"200": resp("the report, as kubexm certs check -o json prints it", map[string]any{"type": "object"})},
			map[string]any{"parameters": []any{clusterName}})},
		{"GET", "/api/v1/jobs", RoleReadOnly, s.listJobs, op("List jobs, newest first",
			map[string]any{"200": resp("the jobs", listOf("jobs", "Job")), "400": resp("bad filter", ref("Error"))},
			map[string]any{"parameters": []any{queryParam("cluster", "only this cluster's jobs", "string"), queryParam("status", "only jobs in this status", "string"), queryParam("limit", "at most this many (default 100, up to 1000)", "integer")}})},
		{"POST", "/api/v1/jobs", RoleOperator, s.createJob, op("Queue a playbook run on a registered cluster; answers at once with the job id",
			map[string]any{
				"202": resp("queued", ref("JobAccepted")),
				"400": resp("bad request: unknown playbook, bad options", ref("Error")),
				"409": resp("the cluster already has an active job, named in the answer", ref("Conflict")),
			}, map[string]any{"requestBody": map[string]any{"required": true, "content": jsonBody(ref("JobRequest"))["content"]}})},
		{"GET", "/api/v1/jobs/{id}", RoleReadOnly, s.getJob, op("Get a job",
			map[string]any{"200": resp("the job", ref("Job"))}, map[string]any{"parameters": []any{jobID}})},
		{"POST", "/api/v1/jobs/{id}/cancel", RoleOperator, s.cancelJob, op("Cancel a job: a queued one at once, a running one is stopped by its worker (as Ctrl-C stops kubexm play)",
			map[string]any{"202": resp("cancelled or cancel asked", ref("Job")), "409": resp("the job has ended", ref("Error"))},
			map[string]any{"parameters": []any{jobID}})},
		{"POST", "/api/v1/jobs/{id}/resume", RoleOperator, s.resumeJob, op("Queue a failed, cancelled or interrupted job again; it continues its run from the engine's journal (kubexm play --resume)",
			map[string]any{"202": resp("queued again", ref("Job")), "409": resp("the job cannot be resumed (it has not ended, or the offline bundle it names was deleted), or its cluster is busy", ref("Conflict"))},
			map[string]any{"parameters": []any{jobID}})},
		{"GET", "/api/v1/jobs/{id}/events", RoleReadOnly, s.jobEvents, op("A job's stored events, oldest first (up to 1000 from ?after)",
			map[string]any{"200": resp("the events", listOf("events", "Event"))},
			map[string]any{"parameters": []any{jobID, afterParam}})},
		{"GET", "/api/v1/jobs/{id}/events/stream", RoleReadOnly, s.streamEvents, op("A job's events as Server-Sent Events (id, event: the kind, data: an Event), ending with an `end` event carrying the job once it has ended",
			map[string]any{"200": map[string]any{"description": "the event stream", "content": map[string]any{"text/event-stream": map[string]any{"schema": map[string]any{"type": "string"}}}}},
			map[string]any{"parameters": []any{jobID, afterParam}})},
		{"GET", "/api/v1/audit", RoleOperator, s.auditLog, op("The audit log: who registered, queued, cancelled or resumed what (newest first)",
			map[string]any{"200": resp("the entries", listOf("audit", "AuditEntry"))}, nil)},
		// A token: the labels name the clusters and their hosts.
		{"GET", "/metrics", RoleReadOnly, s.metrics, op("Prometheus metrics: kubexm_jobs{state}, kubexm_task_duration_seconds, kubexm_host_failures_total, kubexm_jobs_finished_total, kubexm_ssh_dials_total, kubexm_ssh_connections_open",
			map[string]any{"200": map[string]any{"description": "the metrics", "content": map[string]any{"text/plain": map[string]any{"schema": str}}}}, nil)},
	}
}

// openAPI is the OpenAPI 3 document of the routes, /metrics, /healthz and
// itself.
func (s *Server) openAPI() map[string]any {
	paths := map[string]any{}
	add := func(method, path string, o map[string]any) {
		p, _ := paths[path].(map[string]any)
		if p == nil {
			p = map[string]any{}
			paths[path] = p
		}
		p[strings.ToLower(method)] = o
	}
	for _, rt := range s.routes() {
		add(rt.method, rt.path, rt.op)
	}
	open := func(summary, ctype string) map[string]any {
		return map[string]any{"summary": summary, "security": []any{}, "responses": map[string]any{"200": map[string]any{"description": "ok", "content": map[string]any{ctype: map[string]any{"schema": map[string]any{"type": "string"}}}}}}
	}
	add("GET", "/openapi.json", open("This document", "application/json"))
	add("GET", "/healthz", open("Whether the server reaches its database", "application/json"))
	str := map[string]any{"type": "string"}
	strs := map[string]any{"type": "array", "items": str}
	integer := map[string]any{"type": "integer"}
	ts := map[string]any{"type": "string", "format": "date-time"}
	options := obj(map[string]any{"tags": strs, "skip_tags": strs, "limit": str, "check": map[string]any{"type": "boolean"}, "diff": map[string]any{"type": "boolean"},
		"extra_vars":     map[string]any{"type": "array", "items": str, "description": "as -e: name=value or a {...} mapping; no @file. Stored as given: put secrets in the cluster.yaml, not here"},
		"offline_bundle": map[string]any{"type": "string", "description": "the sha256 of a bundle uploaded for the cluster (POST /api/v1/clusters/{name}/bundles): the run installs from it, as kubexm play --offline-bundle"},
		"backup":         map[string]any{"type": "string", "description": "restore playbook only: the name of a backup of the cluster on the server (GET /api/v1/clusters/{name}/backups); the run gets --backup of it"},
		"command": map[string]any{"type": "object", "description": "playbook run-command only, and alone: an ad-hoc command run as kubexm run command runs it; its events are one host_result per host and a summary. Stored as given: no secrets in it. Not resumed",
			"properties": map[string]any{"argv": strs, "nodes": strs, "groups": strs, "shell": map[string]any{"type": "boolean"}, "become": map[string]any{"type": "boolean"}, "become_user": str,
				"timeout": map[string]any{"type": "string", "description": "a duration, e.g. 30s"}, "forks": integer}, "required": []string{"argv"}}})
	job := obj(map[string]any{
		"id": str, "cluster": str, "config_version": integer, "playbook": str, "options": options,
		"status":       map[string]any{"type": "string", "enum": []string{"queued", "running", "interrupted", "succeeded", "failed", "cancelled"}},
		"current_task": str, "error": str, "worker": str, "run_id": str, "resume": map[string]any{"type": "boolean"}, "attempts": integer,
		"cancel_requested": map[string]any{"type": "boolean"}, "created_by": str, "created_at": ts, "started_at": ts, "finished_at": ts, "heartbeat_at": ts,
	}, "id", "cluster", "playbook", "status")
	return map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{"title": "kubexm server", "version": "v1",
			"description": "Service mode of kubexm: register cluster.yaml files, queue playbook runs as jobs, follow their events. Every /api route needs `Authorization: Bearer TOKEN`; mutations need an operator token."},
		"paths": paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
			"schemas": map[string]any{
				"Error":          obj(map[string]any{"error": str}, "error"),
				"Conflict":       obj(map[string]any{"error": str, "job_id": str, "status": str}, "error"),
				"Cluster":        obj(map[string]any{"name": str, "version": integer, "created_at": ts, "updated_at": ts}, "name", "version"),
				"ClusterVersion": obj(map[string]any{"cluster": str, "version": integer, "config": map[string]any{"type": "string", "description": "the cluster.yaml with defaults filled in and secrets masked"}, "created_by": str, "created_at": ts}, "cluster", "version"),
				"JobRequest":     obj(map[string]any{"cluster": str, "playbook": map[string]any{"type": "string", "description": "a playbook name (kubexm playbook list)"}, "config_version": map[string]any{"type": "integer", "description": "default: the newest"}, "options": options}, "cluster", "playbook"),
				"Job":            job,
				"JobAccepted":    obj(map[string]any{"job_id": str, "job": ref("Job")}, "job_id"),
				"Event": obj(map[string]any{"id": integer, "job_id": str, "time": ts, "kind": str, "task": str, "host": str, "status": str,
					"data": map[string]any{"type": "object", "description": "the engine's event as `kubexm play -o json` prints it (secrets masked), or the service's own"}}, "id", "kind"),
				"Backup": obj(map[string]any{"name": str, "size": integer, "sha256": str, "created_at": ts}, "name", "size"),
				"NodeRow": obj(map[string]any{"name": str, "address": str, "roles": strs, "in_cluster_file": map[string]any{"type": "boolean"}, "status": str, "age": str, "kubelet_version": str,
					"kubernetes_node": map[string]any{"type": "boolean"}, "in_api": map[string]any{"type": "boolean"}}, "name"),
				"Bundle":     obj(map[string]any{"sha256": str, "size": integer, "artifacts": integer, "uploaded_at": ts}, "sha256", "size"),
				"AuditEntry": obj(map[string]any{"id": integer, "time": ts, "actor": str, "action": str, "target": str, "detail": str}),
			},
		},
	}
}
