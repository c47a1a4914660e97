// Package e2e holds kubexm's end-to-end suites (build tag e2e, run with
// `make e2e`): each starts its own test machines with testhosts.Up, so they
// need root and systemd-nspawn, and they are slow.
//
// When a suite fails it logs a failure report: the tasks that failed in its
// last kubexm run; on every machine the state of the units kubexm manages,
// and `systemctl status` and the last 100 journal lines of each one that is
// not active or that a failed task names; for a cluster, `kubectl get
// nodes,pods -A -o wide` and the events. Switches:
//
//	KUBEXM_KEEP_MACHINES=1  leave the machines up (the log says how to reach them and take them down)
//	KUBEXM_E2E_PREFIX=cs    name the runs cs<suite letter> instead of a random prefix
//	KUBEXM_E2E_VARS='{...}' one more -e for every kubexm run, e.g. to break something on purpose:
//	                        '{"kube_proxy_extra_config": {"mode": "bogus"}}'
//	KUBEXM_E2E_KUBEADM_ONLY=kubeadm  TestKubeadmCluster's stacked-etcd variant alone (make e2e sets it:
//	                        E2E_KUBEADM_ONLY= runs both); =kubexm the etcd.type kubexm one alone
//	KUBEXM_E2E_KUBEADM_CNI=calico  TestKubeadmCluster's stacked-etcd variant on calico instead of
//	                        flannel (make e2e sets it: E2E_KUBEADM_CNI=flannel keeps flannel)
//	KUBEXM_E2E_NODES_RUNTIME=docker  TestNodes on docker and cri-dockerd (make e2e-nodes-docker)
//	KUBEXM_E2E_KUBEADM_RUNTIME=docker  TestKubeadmCluster on docker and cri-dockerd (make
//	                        e2e-kubeadm-docker, with KUBEXM_E2E_KUBEADM_ONLY=kubeadm)
//	KUBEXM_E2E_SITEFORK=0   TestKubernetesCluster without its site fork step (make e2e sets it:
//	                        E2E_SITEFORK=1 keeps it); KUBEXM_E2E_SITEFORK_ONLY=1 runs that step alone
package e2e
