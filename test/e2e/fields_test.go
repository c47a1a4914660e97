//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/engine/eval"
	"github.com/mensylisir/kubexm/schema"
)

// Issue 46: no cluster.yaml field is accepted and ignored. Every leaf field
// of the schema (schema.LeafFields, by reflection) in every mode
// (kubernetes.type × etcd.type) must be claimed below, and every claim is
// checked:
//
//   - rendered: the field set in a cluster.yaml of that mode goes through
//     schema's inventory, the shared and role defaults into the role's
//     real template, and `want` is in the output while it is not with the
//     field at its default (so the text comes from the field);
//   - inventory: the value reaches the engine's inventory (hosts, groups,
//     variables other than spec) that connects to and groups the hosts;
//   - refused: that cluster.yaml is refused by `config validate` (schema
//     validation and the built-in support matrix), naming the field;
//   - read: a role or Go file reads the field (needle in file) and the
//     named test, which checks what it does, exists. Weaker than rendered:
//     it proves the field is read and a test names it, not the output.
//
// A field added to schema/types.go without a claim fails the test, as does
// a claim whose check no longer holds. The counts per mode are logged.

// fieldMode is one kubernetes.type × etcd.type (etcd.type kubeadm exists
// only with kubernetes.type kubeadm).
type fieldMode struct{ kube, etcd string }

func (m fieldMode) String() string { return "kubernetes.type " + m.kube + ", etcd.type " + m.etcd }

var fieldModes = []fieldMode{{"kubexm", "kubexm"}, {"kubexm", "external"}, {"kubeadm", "kubeadm"}, {"kubeadm", "kubexm"}, {"kubeadm", "external"}}

type modeSet func(fieldMode) bool

var (
	inAll       modeSet = func(fieldMode) bool { return true }
	inBinary    modeSet = func(m fieldMode) bool { return m.kube == "kubexm" }
	inKubeadm   modeSet = func(m fieldMode) bool { return m.kube == "kubeadm" }
	inEtcdOwn   modeSet = func(m fieldMode) bool { return m.etcd == "kubexm" }
	inStacked   modeSet = func(m fieldMode) bool { return m.etcd == "kubeadm" }
	inExternal  modeSet = func(m fieldMode) bool { return m.etcd == "external" }
	inNotStack  modeSet = func(m fieldMode) bool { return m.etcd != "kubeadm" }
	inNotExtern modeSet = func(m fieldMode) bool { return m.etcd != "external" }
)

// fieldClaim is how one field is applied or refused in the modes `in`.
type fieldClaim struct {
	in modeSet
	// set writes the field into the cluster.yaml document's spec (and may
	// add what the value needs); nil sets the field's path to value.
	set   func(spec map[string]any)
	value any

	// rendered: role, template (under roles/ROLE/templates), the host it
	// is rendered for, more role defaults to load first and variables the
	// run would have (facts, registered results); want in the output.
	role, tmpl, host string
	deps             []string
	vars             map[string]any
	want             string

	inventory bool   // want in the inventory
	refused   bool   // config validate refuses it
	names     string // refused: what the refusal names (default: the field's name)
	taskFile  string // rendered: a task of role's tasks/taskFile instead of a template
	taskName  string
	file      string // read: file (from the module root) holding needle
	needle    string
	test      string // read: the test that checks it
}

func (c fieldClaim) kind() string {
	switch {
	case c.tmpl != "" || c.taskName != "":
		return "rendered"
	case c.inventory:
		return "inventory"
	case c.refused:
		return "refused"
	}
	return "read"
}

func rendered(in modeSet, role, tmpl string, value any, want string) fieldClaim {
	return fieldClaim{in: in, role: role, tmpl: tmpl, host: "m1", value: value, want: want}
}

func inInventory(in modeSet, value any, want string) fieldClaim {
	return fieldClaim{in: in, inventory: true, value: value, want: want}
}

func refusedWith(in modeSet, value any) fieldClaim {
	return fieldClaim{in: in, refused: true, value: value}
}

func readBy(in modeSet, file, needle, test string) fieldClaim {
	return fieldClaim{in: in, file: file, needle: needle, test: test}
}

// with adds role defaults and variables to a rendered claim.
func (c fieldClaim) with(deps []string, vars map[string]any) fieldClaim {
	c.deps, c.vars = deps, vars
	return c
}

// naming: the refusal names that field (the choice the field belongs to).
func (c fieldClaim) naming(field string) fieldClaim {
	c.names = field
	return c
}

// task: the claim renders a task of the role instead of a template.
func task(in modeSet, role, file, name string, value any, want string) fieldClaim {
	return fieldClaim{in: in, role: role, taskFile: file, taskName: name, host: "m1", value: value, want: want}
}

func (c fieldClaim) setBy(f func(spec map[string]any)) fieldClaim {
	c.set = f
	return c
}

var (
	kubeadmDeps = []string{"kubernetes/pki"}
	kubeadmRun  = map[string]any{"facts": map[string]any{"cgroup_version": 2}}
)

// fieldClaims: every leaf field's claims.
func fieldClaims() map[string][]fieldClaim {
	kadm := func(value any, want string) fieldClaim {
		return rendered(inKubeadm, "kubernetes/kubeadm", "kubeadm-init.yaml.tmpl", value, want).with(kubeadmDeps, kubeadmRun)
	}
	stacked := func(value any, want string) fieldClaim {
		return rendered(inStacked, "kubernetes/kubeadm", "kubeadm-init.yaml.tmpl", value, want).with(kubeadmDeps, kubeadmRun)
	}
	etcdConf := func(value any, want string) fieldClaim {
		return rendered(inEtcdOwn, "etcd", "etcd.conf.yml.tmpl", value, want).with(nil, map[string]any{"etcd_address": "10.0.0.1"})
	}
	// spec.etcd's settings of an etcd kubexm does not run (external).
	noEtcd := func(value any) fieldClaim { return refusedWith(inExternal, value) }
	etcdField := func(value any, conf, flag string) []fieldClaim {
		return []fieldClaim{etcdConf(value, conf), stacked(value, flag), noEtcd(value)}
	}
	cm := func(value any, want string) fieldClaim {
		return rendered(inBinary, "kubernetes/control-plane", "kube-controller-manager.service.tmpl", value, want).with(kubeadmDeps, nil)
	}
	api := func(value any, want string) fieldClaim {
		return rendered(inBinary, "kubernetes/control-plane", "kube-apiserver.service.tmpl", value, want).with(kubeadmDeps, nil)
	}
	kubelet := func(in modeSet, value any, want string) fieldClaim {
		return rendered(in, "kubernetes/node", "kubelet-config.yaml.tmpl", value, want).with(nil, kubeletRun)
	}
	proxy := func(value any, want string) fieldClaim {
		return rendered(inBinary, "kubernetes/node", "kube-proxy-config.yaml.tmpl", value, want)
	}
	dns := func(value any, want string) []fieldClaim {
		return []fieldClaim{
			rendered(inBinary, "coredns", "coredns.yaml.tmpl", value, want),
			rendered(inKubeadm, "coredns", "coredns-corefile.yaml.tmpl", value, want),
		}
	}
	zone := func(k string, v any) func(map[string]any) {
		return func(spec map[string]any) {
			z := map[string]any{"zones": []any{"zone.example"}, "nameservers": []any{"192.0.2.53"}}
			z[k] = v
			setPath(spec, "dns.coredns.externalZones", []any{z})
		}
	}
	nlZone := func(k string, v any) func(map[string]any) {
		return func(spec map[string]any) {
			z := map[string]any{"zones": []any{"zone.example"}, "nameservers": []any{"192.0.2.53"}}
			z[k] = v
			setPath(spec, "dns.nodelocaldns.externalZones", []any{z})
		}
	}
	nl := func(value any, want string) fieldClaim {
		return rendered(inAll, "nodelocaldns", "nodelocaldns.yaml.tmpl", value, want)
	}
	inv := func(value any, want string) []fieldClaim { return []fieldClaim{inInventory(inAll, value, want)} }
	bastion := func(k string, value any, want string) []fieldClaim {
		return []fieldClaim{inInventory(inAll, nil, want).setBy(func(spec map[string]any) {
			setPath(spec, "hosts[*].bastion", map[string]any{"address": "192.0.2.210", k: value})
		})}
	}
	specBastion := func(k string, value any, want string) []fieldClaim {
		return []fieldClaim{inInventory(inAll, nil, want).setBy(func(spec map[string]any) {
			setPath(spec, "bastion", map[string]any{"address": "192.0.2.211", k: value})
		})}
	}
	deployedRegistry := func(spec map[string]any) {
		setPath(spec, "registry.registryDataDir", "/data/sentinel-registry")
		setPath(spec, "registry.type", "registry")
		setPath(spec, "registry.privateRegistry", "reg.sentinel.example:5443")
		setPath(spec, "registry.auths", map[string]any{"reg.sentinel.example:5443": map[string]any{"username": "u", "password": "p"}})
		setPath(spec, "roleGroups.registry", []any{"w1"})
	}
	read := func(file, needle, test string) []fieldClaim { return []fieldClaim{readBy(inAll, file, needle, test)} }
	refused := func(value any) []fieldClaim { return []fieldClaim{refusedWith(inAll, value)} }
	containerd := func(value any, want string) []fieldClaim {
		return []fieldClaim{rendered(inAll, "containerd", "config.toml.tmpl", value, want)}
	}
	other := func(rt string) func(value any) []fieldClaim {
		// The settings of a runtime kubexm does not install: refused with
		// containerRuntime.type (that type is not supported yet).
		return func(value any) []fieldClaim {
			return []fieldClaim{refusedWith(inAll, nil).naming("spec.kubernetes.containerRuntime.type").setBy(func(spec map[string]any) {
				setPath(spec, "kubernetes.containerRuntime.type", rt)
				setPath(spec, "kubernetes.containerRuntime."+strings.ReplaceAll(rt, "-", ""), value)
			})}
		}
	}
	// docker's settings (containerRuntime.type docker): rendered into
	// roles/docker's daemon.json.
	dockerConf := func(set func(spec map[string]any), want string) []fieldClaim {
		return []fieldClaim{rendered(inAll, "docker", "daemon.json.tmpl", nil, want).setBy(func(spec map[string]any) {
			setPath(spec, "kubernetes.containerRuntime.type", "docker")
			set(spec)
		})}
	}
	// calico (supported with vxlan): a setting rendered into its manifest.
	calico := func(k string, v any, want string) []fieldClaim {
		return []fieldClaim{rendered(inAll, "cni/calico", "calico.yaml.tmpl", nil, want).setBy(func(spec map[string]any) {
			setPath(spec, "network.plugin", "calico")
			setPath(spec, "network.calico", map[string]any{k: v})
		})}
	}
	cilium := func(k string, v any) []fieldClaim {
		return []fieldClaim{refusedWith(inAll, nil).naming("spec.network.plugin").setBy(func(spec map[string]any) {
			setPath(spec, "network.plugin", "cilium")
			setPath(spec, "network.cilium", map[string]any{k: v})
		})}
	}
	auth := func(k string, v any, want string) []fieldClaim {
		return []fieldClaim{rendered(inAll, "containerd", "config.toml.tmpl", nil, want).setBy(func(spec map[string]any) {
			setPath(spec, "registry.auths", map[string]any{"sentinel.example": map[string]any{"username": "u", k: v}})
		})}
	}
	// The loop's list holds the field's effect; the task's own
	// parameters render for an item of it.
	loopItem := map[string]any{"item": map[string]any{"host": "h", "dir": "/d"}}
	hostsToml := func(k string, v any, want string) []fieldClaim {
		return []fieldClaim{task(inAll, "containerd", "main.yaml", "containerd - hosts.toml of the registries", nil, want).with(nil, loopItem).setBy(func(spec map[string]any) {
			setPath(spec, "registry.auths", map[string]any{"sentinel.example": map[string]any{"username": "u", k: v}})
		})}
	}
	addon := func(file, needle string) []fieldClaim {
		return read("roles/addons/tasks/"+file, needle, "TestAddonsRefused")
	}
	// cluster.yaml's hooks reach the engine as its load options.
	hook := func(needle string) []fieldClaim { return read("lifecycle/lifecycle.go", needle, "TestHooks") }
	return map[string][]fieldClaim{
		"apiVersion":    refused("kubexm.example/v0"),
		"kind":          refused("Clusters"),
		"metadata.name": inv("sentinel-cluster", "sentinel-cluster"),
		"spec.hosts[*].name": {inInventory(inAll, nil, "sentinel-host").setBy(func(spec map[string]any) {
			spec["hosts"] = append(spec["hosts"].([]any), map[string]any{"name": "sentinel-host", "address": "192.0.2.99", "password": "x"})
			setPath(spec, "roleGroups.worker", []any{"w1", "sentinel-host"})
		})},
		"spec.hosts[*].address":                      inv("192.0.2.201", "192.0.2.201"),
		"spec.hosts[*].internalAddress":              inv("192.0.2.202", "192.0.2.202"),
		"spec.hosts[*].port":                         inv(2299, "2299"),
		"spec.hosts[*].user":                         inv("sentineluser", "sentineluser"),
		"spec.hosts[*].password":                     inv("sentinel-password", "sentinel-password"),
		"spec.hosts[*].passwordFile":                 read("schema/validate/secrets.go", "PasswordFile", "TestSecrets"),
		"spec.hosts[*].privateKeyPath":               inv("/etc/passwd", "/etc/passwd"),
		"spec.hosts[*].privateKeyPassphrase":         inv("sentinel-pass", "sentinel-pass"),
		"spec.hosts[*].sudoPassword":                 inv("sentinel-sudo", "sentinel-sudo"),
		"spec.hosts[*].bastion.address":              bastion("address", "192.0.2.212", "192.0.2.212"),
		"spec.hosts[*].bastion.port":                 bastion("port", 2298, "2298"),
		"spec.hosts[*].bastion.user":                 bastion("user", "bastionuser", "bastionuser"),
		"spec.hosts[*].bastion.password":             bastion("password", "bastion-pw", "bastion-pw"),
		"spec.hosts[*].bastion.privateKeyPath":       bastion("privateKeyPath", "/etc/group", "/etc/group"),
		"spec.hosts[*].bastion.privateKeyPassphrase": bastion("privateKeyPassphrase", "bastion-pp", "bastion-pp"),
		"spec.hosts[*].connection":                   read("schema/inventory.go", `h.Connection == "local"`, "TestInventoryLocalhost"),
		"spec.hosts[*].arch":                         inv("arm64", "arm64"),
		"spec.hosts[*].labels":                       inv(map[string]any{"sentinel-label": "yes"}, "sentinel-label"),
		"spec.hosts[*].vars":                         inv(map[string]any{"sentinel_var": "sv"}, "sentinel_var"),
		"spec.bastion.address":                       specBastion("port", 22, "192.0.2.211"),
		"spec.bastion.port":                          specBastion("port", 2297, "2297"),
		"spec.bastion.user":                          specBastion("user", "sbuser", "sbuser"),
		"spec.bastion.password":                      specBastion("password", "sb-pw", "sb-pw"),
		"spec.bastion.privateKeyPath":                specBastion("privateKeyPath", "/etc/hostname", "/etc/hostname"),
		"spec.bastion.privateKeyPassphrase":          specBastion("privateKeyPassphrase", "sb-pp", "sb-pp"),
		"spec.roleGroups.etcd":                       read("schema/inventory.go", `{"etcd", &rg.Etcd}`, "TestInventoryFromFullExample"),
		"spec.roleGroups.master":                     read("schema/inventory.go", `{"master", &rg.Master}`, "TestInventoryFromFullExample"),
		"spec.roleGroups.worker":                     read("schema/inventory.go", `{"worker", &rg.Worker}`, "TestInventoryFromFullExample"),
		"spec.roleGroups.registry":                   refused([]any{"w1"}),
		"spec.roleGroups.loadbalancer":               read("playbooks/create-cluster/playbook.yaml", "hosts: loadbalancer", "TestVIPClusterYAML"),
		"spec.roleGroupVars":                         inv(map[string]any{"worker": map[string]any{"sentinel_gv": 1}}, "sentinel_gv"),

		"spec.controlPlaneEndpoint.externalLoadBalancer": read("roles/loadbalancer/tasks/main.yaml", "externalLoadBalancer", "TestLoadBalancerKeepalivedTemplates"),
		"spec.controlPlaneEndpoint.internalLoadbalancer": read("roles/loadbalancer/tasks/main.yaml", "internalLoadbalancer", "TestHaproxyBackends"),
		"spec.controlPlaneEndpoint.externalDNS":          read("roles/artifacts/defaults/main.yaml", "externalDNS", "TestLoadBalancerTemplateDefaults"),
		"spec.controlPlaneEndpoint.domain": {
			kadm("sentinel.lb.example", "controlPlaneEndpoint: \"sentinel.lb.example:6443\""),
			readBy(inBinary, "roles/artifacts/defaults/main.yaml", ".spec.controlPlaneEndpoint.domain", "TestLoadBalancerTemplateDefaults"),
		},
		"spec.controlPlaneEndpoint.lb_address": read("roles/artifacts/defaults/main.yaml", "lb_address", "TestKubeadmInitConfigLBAddress"),
		"spec.controlPlaneEndpoint.port": {
			kadm(7443, "controlPlaneEndpoint: \"lb.kubexm.local:7443\""),
			readBy(inBinary, "roles/artifacts/defaults/main.yaml", ".spec.controlPlaneEndpoint.port", "TestLoadBalancerTemplateDefaults"),
		},

		"spec.system.ntpServers": {rendered(inAll, "os", "chrony.conf.tmpl", []any{"ntp.sentinel.example"}, "ntp.sentinel.example")},
		"spec.system.timezone":   {task(inAll, "os", "main.yaml", "Timezone - from spec.system.timezone", "Asia/Kathmandu", "Asia/Kathmandu")},
		"spec.system.rpms": {task(inAll, "os", "main.yaml", "Packages - choose the list for this host", []any{"sentinel-rpm"}, "sentinel-rpm").
			with(nil, map[string]any{"os_pkg_family": "rpm"})},
		"spec.system.debs": {task(inAll, "os", "main.yaml", "Packages - choose the list for this host", []any{"sentinel-deb"}, "sentinel-deb").
			with(nil, map[string]any{"os_pkg_family": "deb"})},

		"spec.kubernetes.type":    read("roles/artifacts/defaults/main.yaml", `kubernetes_type: "{{ .spec.kubernetes.type }}"`, "TestKubeadmInitConfigTemplate"),
		"spec.kubernetes.version": read("roles/artifacts/defaults/main.yaml", "spec.kubernetes.version", "TestKubernetesTemplatesPerMinor"),
		"spec.kubernetes.apiserverCertExtraSans": {
			kadm([]any{"sentinel-san.example"}, "sentinel-san.example"),
			readBy(inBinary, "roles/kubernetes/pki/defaults/main.yaml", "apiserverCertExtraSans", "TestKubernetesTemplatePKIDefaults"),
		},
		"spec.kubernetes.containerRuntime.type":               read("roles/artifacts/defaults/main.yaml", `container_runtime_type: "{{ .spec.kubernetes.containerRuntime.type }}"`, "TestContainerdConfigTemplate"),
		"spec.kubernetes.containerRuntime.customRole":         read("roles/artifacts/defaults/main.yaml", `container_runtime_custom_role: "{{ .spec.kubernetes.containerRuntime.customRole }}"`, "TestCustomNetworkRole"),
		"spec.kubernetes.containerRuntime.version":            read("roles/containerd/defaults/main.yaml", "spec.kubernetes.containerRuntime.version", "TestContainerdConfigTemplate"),
		"spec.kubernetes.containerRuntime.containerd.version": read("schema/defaults.go", "setStr(&cr.Version, rs.Version)", "TestValidationRules"),
		"spec.kubernetes.containerRuntime.containerd.registryMirrors": {task(inAll, "containerd", "main.yaml", "containerd - hosts.toml of the registries", nil, "mirror.sentinel.example").with(nil, loopItem).setBy(func(spec map[string]any) {
			setPath(spec, "kubernetes.containerRuntime.containerd", map[string]any{"registryMirrors": []any{"https://mirror.sentinel.example"}})
		})},
		"spec.kubernetes.containerRuntime.containerd.insecureRegistries": {task(inAll, "containerd", "main.yaml", "containerd - hosts.toml of the registries", nil, "insecure.sentinel.example").with(nil, loopItem).setBy(func(spec map[string]any) {
			setPath(spec, "kubernetes.containerRuntime.containerd", map[string]any{"insecureRegistries": []any{"insecure.sentinel.example"}})
		})},
		"spec.kubernetes.containerRuntime.docker.version": read("schema/defaults.go", "setStr(&cr.Version, rs.Version)", "TestDockerTemplates"),
		"spec.kubernetes.containerRuntime.docker.registryMirrors": dockerConf(func(spec map[string]any) {
			setPath(spec, "kubernetes.containerRuntime.docker", map[string]any{"registryMirrors": []any{"https://mirror.sentinel.example"}})
		}, "mirror.sentinel.example"),
		"spec.kubernetes.containerRuntime.docker.insecureRegistries": dockerConf(func(spec map[string]any) {
			setPath(spec, "kubernetes.containerRuntime.docker", map[string]any{"insecureRegistries": []any{"insecure.sentinel.example"}})
		}, "insecure.sentinel.example"),
		"spec.kubernetes.containerRuntime.crio.version":             other("cri-o")(map[string]any{"version": "1.33.0"}),
		"spec.kubernetes.containerRuntime.crio.registryMirrors":     other("cri-o")(map[string]any{"registryMirrors": []any{"https://m.example"}}),
		"spec.kubernetes.containerRuntime.crio.insecureRegistries":  other("cri-o")(map[string]any{"insecureRegistries": []any{"i.example"}}),
		"spec.kubernetes.containerRuntime.isula.version":            other("isula")(map[string]any{"version": "2.1.5"}),
		"spec.kubernetes.containerRuntime.isula.registryMirrors":    other("isula")(map[string]any{"registryMirrors": []any{"https://m.example"}}),
		"spec.kubernetes.containerRuntime.isula.insecureRegistries": other("isula")(map[string]any{"insecureRegistries": []any{"i.example"}}),
		"spec.kubernetes.clusterName": {
			kadm("sentinel.local", "dnsDomain: \"sentinel.local\""),
			kubelet(inBinary, "sentinel.local", "clusterDomain: sentinel.local"),
		},
		"spec.operator.enabled":          read("roles/kubexm-controller/defaults/main.yaml", ".spec.operator.enabled", "TestKubexmControllerTemplate"),
		"spec.kubernetes.autoRenewCerts": read("roles/artifacts/defaults/main.yaml", `kube_cert_auto_renew: "{{ .spec.kubernetes.autoRenewCerts }}"`, "TestKubeadmAutoRenewPlaybook"),
		"spec.kubernetes.masqueradeAll": {
			kadm(true, "masqueradeAll: true"),
			proxy(true, "masqueradeAll: true"),
		},
		"spec.kubernetes.maxPods":      {kadm(173, "maxPods: 173"), kubelet(inBinary, 173, "maxPods: 173")},
		"spec.kubernetes.podPidsLimit": {kadm(4173, "podPidsLimit: 4173"), kubelet(inBinary, 4173, "podPidsLimit: 4173")},
		"spec.kubernetes.nodeCidrMaskSize": {
			kadm(27, "{name: \"node-cidr-mask-size\", value: \"27\"}"),
			cm(27, "--node-cidr-mask-size=27"),
		},
		"spec.kubernetes.proxyMode": {kadm("nftables", "mode: nftables"), proxy("nftables", "mode: nftables")},
		"spec.kubernetes.featureGates": {
			kadm(map[string]any{"SentinelGate": true}, "{name: \"feature-gates\", value: \"SentinelGate=true\"}"),
			api(map[string]any{"SentinelGate": true}, "--feature-gates=SentinelGate=true"),
			cm(map[string]any{"SentinelGate": true}, "--feature-gates=SentinelGate=true"),
			rendered(inBinary, "kubernetes/control-plane", "kube-scheduler.service.tmpl", map[string]any{"SentinelGate": true}, "--feature-gates=SentinelGate=true").with(kubeadmDeps, nil),
			kubelet(inBinary, map[string]any{"SentinelGate": true}, "SentinelGate: true"),
		},
		"spec.kubernetes.kubeProxyConfiguration": {
			kadm(map[string]any{"bindAddress": "192.0.2.77"}, "bindAddress: 192.0.2.77"),
			proxy(map[string]any{"bindAddress": "192.0.2.77"}, "bindAddress: 192.0.2.77"),
		},
		"spec.kubernetes.kubeletArgs": {
			rendered(inKubeadm, "kubernetes/kubeadm", "kubelet.service.tmpl", []any{"--sentinel-flag=1"}, " --sentinel-flag=1"),
			rendered(inBinary, "kubernetes/node", "kubelet.service.tmpl", []any{"--sentinel-flag=1"}, "--sentinel-flag=1").with(nil, kubeletRun),
		},

		"spec.etcd.type": read("roles/artifacts/defaults/main.yaml", `etcd_type: "{{ .spec.etcd.type }}"`, "TestKubeadmInitConfigExternalEtcd"),
		"spec.etcd.version": {
			readBy(inEtcdOwn, "roles/etcd/defaults/main.yaml", ".spec.etcd.version", "TestEtcdConfigTemplate"),
			// The stacked member runs the etcd image kubeadm pins
			// (kubeadm_etcd_image_version): another version is refused.
			refusedWith(inStacked, "v3.6.15"),
			noEtcd("v3.6.15"),
		},
		"spec.etcd.external.endpoints": {
			rendered(inKubeadm, "kubernetes/kubeadm", "kubeadm-init.yaml.tmpl", nil, "https://192.0.2.11:2379").with(kubeadmDeps, kubeadmRun).external([]any{"https://192.0.2.11:2379"}).only(inExternal),
			readBy(func(m fieldMode) bool { return m.kube == "kubexm" && m.etcd == "external" }, "roles/artifacts/defaults/main.yaml", "spec.etcd.external.endpoints", "TestEtcdMembersTheAPIServersUse"),
			refusedWith(inNotExtern, []any{"https://192.0.2.11:2379"}),
		},
		"spec.etcd.external.caFile":   externalFile("caFile"),
		"spec.etcd.external.certFile": externalFile("certFile"),
		"spec.etcd.external.keyFile":  externalFile("keyFile"),
		"spec.etcd.dataDir": {
			etcdConf("/data/sentinel-etcd", "data-dir: /data/sentinel-etcd"),
			stacked("/data/sentinel-etcd", "dataDir: \"/data/sentinel-etcd\""),
			noEtcd("/data/sentinel-etcd"),
		},
		"spec.etcd.heartbeatInterval":       etcdField(317, "heartbeat-interval: 317", "{name: \"heartbeat-interval\", value: \"317\"}"),
		"spec.etcd.electionTimeout":         etcdField(3170, "election-timeout: 3170", "{name: \"election-timeout\", value: \"3170\"}"),
		"spec.etcd.snapshotCount":           etcdField(5170, "snapshot-count: 5170", "{name: \"snapshot-count\", value: \"5170\"}"),
		"spec.etcd.autoCompactionRetention": etcdField(17, "auto-compaction-retention: \"17\"", "{name: \"auto-compaction-retention\", value: \"17\"}"),
		"spec.etcd.metrics":                 etcdField("extensive", "metrics: extensive", "{name: \"metrics\", value: \"extensive\"}"),
		"spec.etcd.quotaBackendBytes":       etcdField(4294967171, "quota-backend-bytes: 4294967171", "{name: \"quota-backend-bytes\", value: \"4294967171\"}"),
		"spec.etcd.maxRequestBytes":         etcdField(2097171, "max-request-bytes: 2097171", "{name: \"max-request-bytes\", value: \"2097171\"}"),
		"spec.etcd.maxSnapshots":            {refusedWith(inAll, 7)},
		"spec.etcd.maxWals":                 etcdField(17, "max-wals: 17", "{name: \"max-wals\", value: \"17\"}"),
		"spec.etcd.logLevel":                etcdField("warn", "log-level: warn", "{name: \"log-level\", value: \"warn\"}"),
		"spec.etcd.backupPeriod": {
			rendered(inEtcdOwn, "etcd", "kubexm-etcd-backup.timer.tmpl", 171, "171"),
			refusedWith(func(m fieldMode) bool { return m.etcd != "kubexm" }, 171),
		},
		"spec.etcd.backupDir":        backupSetting("backupDir", "/sentinel/backups", "/sentinel/backups"),
		"spec.etcd.keepBackupNumber": backupSetting("keepBackupNumber", 17, "17"),

		"spec.network.plugin":     read("roles/artifacts/defaults/main.yaml", `network_plugin: "{{ .spec.network.plugin }}"`, "TestAddonTemplateFlannel"),
		"spec.network.customRole": read("roles/artifacts/defaults/main.yaml", `network_custom_role: "{{ .spec.network.customRole }}"`, "TestCustomNetworkRole"),
		// ipip is refused (no suite has run it); vxlanMode Always is the
		// default, so its reading is the proof.
		"spec.network.calico.ipipMode": {refusedWith(inAll, nil).naming("spec.network.calico.ipipMode").setBy(func(spec map[string]any) {
			setPath(spec, "network.plugin", "calico")
			setPath(spec, "network.calico", map[string]any{"ipipMode": "Always"})
		})},
		"spec.network.calico.vxlanMode": read("roles/cni/calico/defaults/main.yaml", "calico_vxlan_mode: \"{{ .spec.network.calico.vxlanMode", "TestCalicoTemplate"),
		"spec.network.calico.vethMTU":   calico("vethMTU", 1300, `veth_mtu: "1300"`),
		"spec.network.flannel.backendMode": {rendered(inAll, "cni/flannel", "kube-flannel.yaml.tmpl", nil, "host-gw").setBy(func(spec map[string]any) {
			setPath(spec, "network.flannel", map[string]any{"backendMode": "host-gw"})
		})},
		"spec.network.cilium.tunnelMode":           cilium("tunnelMode", "geneve"),
		"spec.network.cilium.kubeProxyReplacement": cilium("kubeProxyReplacement", true),
		"spec.network.kubePodsCIDR": {
			kadm("10.244.0.0/16", "podSubnet: \"10.244.0.0/16\""),
			cm("10.244.0.0/16", "--cluster-cidr=10.244.0.0/16"),
		},
		"spec.network.kubeServiceCIDR": {
			kadm("10.96.0.0/16", "serviceSubnet: \"10.96.0.0/16\""),
			api("10.96.0.0/16", "--service-cluster-ip-range=10.96.0.0/16"),
		},
		// calico's block size.
		"spec.network.ippool.blockSize": {rendered(inAll, "cni/calico", "calico.yaml.tmpl", nil, `CALICO_IPV4POOL_BLOCK_SIZE, value: "27"`).setBy(func(spec map[string]any) {
			setPath(spec, "network.plugin", "calico")
			setPath(spec, "network.ippool.blockSize", 27)
		})},
		"spec.storage.openebs.basePath": {refusedWith(inAll, "/sentinel/openebs").naming("spec.storage.openebs")},

		"spec.registry.type":                   read("schema/validate/validate.go", "registry.type external deploys nothing", "TestValidationRules"),
		"spec.registry.privateRegistry":        containerd("reg.sentinel.example", "reg.sentinel.example"),
		"spec.registry.namespaceOverride":      read("roles/artifacts/defaults/main.yaml", "namespaceOverride", "TestContainerdConfigTemplate"),
		"spec.registry.auths[*].username":      auth("username", "sentinel-user", "sentinel.example"),
		"spec.registry.auths[*].password":      auth("password", "sentinel-pw", "sentinel.example"),
		"spec.registry.auths[*].passwordFile":  read("schema/validate/secrets.go", "PasswordFile", "TestSecrets"),
		"spec.registry.auths[*].skipTLSVerify": hostsToml("skipTLSVerify", true, "skip_verify: true"),
		"spec.registry.auths[*].plainHTTP":     hostsToml("plainHTTP", true, "server: http://sentinel.example"),
		// A directory of the control machine, relative to the cluster file
		// (test/e2e), copied to the nodes' certs.d.
		"spec.registry.auths[*].certsPath": {task(inAll, "containerd", "main.yaml", "containerd - CA and client certificates of the registries (certsPath)", nil, "schema/testdata/certs/dockerhub.kubexm.local").with(nil, loopItem).setBy(func(spec map[string]any) {
			setPath(spec, "registry.auths", map[string]any{"sentinel.example": map[string]any{"certsPath": "../../schema/testdata/certs/dockerhub.kubexm.local"}})
		})},
		"spec.registry.containerdDataDir": containerd("/data/sentinel-containerd", "/data/sentinel-containerd"),
		"spec.registry.dockerDataDir": dockerConf(func(spec map[string]any) {
			setPath(spec, "registry.dockerDataDir", "/data/sentinel-docker")
		}, "/data/sentinel-docker"),
		// In both modes (kubeadm's: its cluster CA signs the registry's
		// certificate).
		"spec.registry.registryDataDir": {rendered(inAll, "registry", "config.yml.tmpl", "/data/sentinel-registry", "/data/sentinel-registry").setBy(deployedRegistry)},
		"spec.registry.harborConfig": {refusedWith(inAll, nil).naming("spec.registry.type").setBy(func(spec map[string]any) {
			setPath(spec, "registry.type", "harbor")
			setPath(spec, "registry.harborConfig", map[string]any{"a": 1})
		})},

		"spec.addons[*].name":                     addon("main.yaml", "release: \"{{ .item.name }}\""),
		"spec.addons[*].namespace":                addon("main.yaml", ".item.namespace"),
		"spec.addons[*].sources.yaml.path":        addon("yaml.yaml", ".addon.sources.yaml.path"),
		"spec.addons[*].sources.chart.name":       addon("main.yaml", ".item.sources.chart.name"),
		"spec.addons[*].sources.chart.repo":       read("schema/types.go", "The chart repository it was pulled from (informative; kubexm installs from path", "TestAddonsRefused"),
		"spec.addons[*].sources.chart.path":       addon("main.yaml", ".item.sources.chart.path"),
		"spec.addons[*].sources.chart.version":    addon("main.yaml", ".item.sources.chart.version"),
		"spec.addons[*].sources.chart.valuesFile": addon("main.yaml", ".item.sources.chart.valuesFile"),
		"spec.addons[*].sources.chart.values":     addon("main.yaml", ".item.sources.chart.values }}"),

		"spec.dns.dnsEtcHosts":                          dns("192.0.2.88 sentinel-hosts.example", "192.0.2.88 sentinel-hosts.example"),
		"spec.dns.coredns.additionalConfigs":            dns("sentinelplugin", "sentinelplugin"),
		"spec.dns.coredns.externalZones[*].zones":       setAll(dns(nil, "sentinel-zone.example {"), zone("zones", []any{"sentinel-zone.example"})),
		"spec.dns.coredns.externalZones[*].nameservers": setAll(dns(nil, "forward . 192.0.2.177"), zone("nameservers", []any{"192.0.2.177"})),
		"spec.dns.coredns.externalZones[*].cache":       setAll(dns(nil, "cache 177"), zone("cache", 177)),
		"spec.dns.coredns.externalZones[*].rewrite":     setAll(dns(nil, "rewrite name sentinel-rw"), zone("rewrite", []any{"name sentinel-rw x.example"})),
		"spec.dns.coredns.rewriteBlock":                 dns("rewrite name sentinel-rb.example kubernetes.default.svc.cluster.local", "rewrite name sentinel-rb.example"),
		"spec.dns.coredns.upstreamDNSServers":           dns([]any{"192.0.2.178"}, "forward . 192.0.2.178 {"),
		"spec.dns.nodelocaldns.enabled":                 read("playbooks/create-cluster/playbook.yaml", "when: nodelocaldns_enabled", "TestAddonTemplateNodeLocalDNS"),
		"spec.dns.nodelocaldns.localIP": {nl(nil, "169.254.20.177").setBy(func(spec map[string]any) {
			setPath(spec, "dns.nodelocaldns", map[string]any{"localIP": "169.254.20.177"})
		})},
		"spec.dns.nodelocaldns.externalZones[*].zones":       {nl(nil, "sentinel-nl.example").setBy(nlZone("zones", []any{"sentinel-nl.example"}))},
		"spec.dns.nodelocaldns.externalZones[*].nameservers": {nl(nil, "192.0.2.179").setBy(nlZone("nameservers", []any{"192.0.2.179"}))},
		"spec.dns.nodelocaldns.externalZones[*].cache":       {nl(nil, "cache 179").setBy(nlZone("cache", 179))},
		"spec.dns.nodelocaldns.externalZones[*].rewrite":     {nl(nil, "sentinel-nlrw").setBy(nlZone("rewrite", []any{"name sentinel-nlrw x.example"}))},

		"spec.extra.hosts[*].domain": {task(inAll, "os", "main.yaml", "/etc/hosts - managed block", nil, "192.0.2.150 sentinel-extra.example").
			setBy(func(spec map[string]any) {
				setPath(spec, "extra.hosts", []any{map[string]any{"domain": "sentinel-extra.example", "address": "192.0.2.150"}})
			})},
		"spec.extra.hosts[*].address": {task(inAll, "os", "main.yaml", "/etc/hosts - managed block", nil, "192.0.2.150 sentinel-extra.example").
			setBy(func(spec map[string]any) {
				setPath(spec, "extra.hosts", []any{map[string]any{"domain": "sentinel-extra.example", "address": "192.0.2.150"}})
			})},
		"spec.extra.resolves[*].address": {task(inAll, "os", "main.yaml", "resolv.conf - name servers from spec.extra.resolves", nil, "nameserver 192.0.2.151").
			setBy(func(spec map[string]any) {
				setPath(spec, "extra.resolves", []any{map[string]any{"address": "192.0.2.151"}})
			})},

		"spec.hooks[*].playbook": hook("Playbook: h.Playbook"),
		"spec.hooks[*].phase":    hook("Phase: h.Phase"),
		"spec.hooks[*].when":     hook("When: h.When"),
		"spec.hooks[*].file":     hook("file, at := c.HookFile(i)"),
	}
}

var kubeletRun = map[string]any{"facts": map[string]any{"cgroup_version": 2}, "kubelet_resolv_conf": "/etc/resolv.conf"}

// setAll gives every claim the same setter.
func setAll(cs []fieldClaim, set func(map[string]any)) []fieldClaim {
	out := slices.Clone(cs)
	for i := range out {
		out[i].set = set
	}
	return out
}

// only narrows a claim's modes.
func (c fieldClaim) only(in modeSet) fieldClaim {
	prev := c.in
	c.in = func(m fieldMode) bool { return prev(m) && in(m) }
	return c
}

// external sets spec.etcd.external.endpoints (with etcd.type external).
func (c fieldClaim) external(endpoints []any) fieldClaim {
	c.set = func(spec map[string]any) { setPath(spec, "etcd.external.endpoints", endpoints) }
	return c
}

// externalFile: the external etcd's TLS files reach the masters (kubeadm's
// external etcd and binary mode's API servers), and are refused with an
// etcd kubexm or kubeadm runs.
func externalFile(k string) []fieldClaim {
	return []fieldClaim{
		readBy(inExternal, "roles/artifacts/defaults/main.yaml", "{{ .spec.etcd.external."+k+" }}", "TestKubeadmInitConfigExternalEtcd"),
		refusedWith(inNotExtern, nil).setBy(func(spec map[string]any) {
			setPath(spec, "etcd.external."+k, "sentinel.pem")
		}),
	}
}

// backupSetting: the scheduled snapshots' settings reach roles/etcd's timer
// (etcd.type kubexm) and are refused with the other etcd types.
func backupSetting(k string, v any, want string) []fieldClaim {
	set := func(spec map[string]any) {
		setPath(spec, "etcd.backupPeriod", 60)
		setPath(spec, "etcd."+k, v)
	}
	return []fieldClaim{
		rendered(inEtcdOwn, "etcd", "kubexm-etcd-backup.service.tmpl", nil, want).setBy(set),
		refusedWith(func(m fieldMode) bool { return m.etcd != "kubexm" }, nil).setBy(func(spec map[string]any) { setPath(spec, "etcd."+k, v) }),
	}
}

// setPath sets a field below spec by its path (a.b[*].c: the first element
// of a list, or the entry "sentinel.example" of a mapping of blocks),
// making the blocks on the way.
func setPath(spec map[string]any, path string, v any) {
	segs := strings.Split(path, ".")
	cur := spec
	for i, s := range segs {
		name, each := strings.CutSuffix(s, "[*]")
		if i == len(segs)-1 && !each {
			cur[name] = v
			return
		}
		if each {
			switch l := cur[name].(type) {
			case []any:
				cur = l[0].(map[string]any)
			case map[string]any:
				next, _ := l["sentinel.example"].(map[string]any)
				if next == nil {
					next = map[string]any{}
					l["sentinel.example"] = next
				}
				cur = next
			default:
				next := map[string]any{}
				cur[name] = []any{next}
				cur = next
			}
			if i == len(segs)-1 {
				return
			}
			continue
		}
		next, _ := cur[name].(map[string]any)
		if next == nil {
			next = map[string]any{}
			cur[name] = next
		}
		cur = next
	}
}

// fieldCluster is the cluster.yaml document of a mode: m1 master and etcd
// member, w1 worker.
func fieldCluster(m fieldMode) map[string]any {
	etcd := map[string]any{"type": m.etcd}
	groups := map[string]any{"master": []any{"m1"}, "worker": []any{"w1"}, "etcd": []any{"m1"}}
	if m.etcd == "external" {
		etcd["external"] = map[string]any{"endpoints": []any{"https://192.0.2.10:2379"}}
		delete(groups, "etcd")
	}
	return map[string]any{
		"apiVersion": schema.APIVersion,
		"kind":       schema.Kind,
		"metadata":   map[string]any{"name": "fields"},
		"spec": map[string]any{
			"hosts": []any{
				map[string]any{"name": "m1", "address": "10.0.0.1", "password": "x"},
				map[string]any{"name": "w1", "address": "10.0.0.2", "password": "x"},
			},
			"roleGroups": groups,
			"kubernetes": map[string]any{"type": m.kube},
			"etcd":       etcd,
		},
	}
}

// claimYAML is the mode's cluster.yaml with the claim's value set (or the
// mode's own, at the defaults, when set is false).
func claimYAML(t *testing.T, field string, m fieldMode, c fieldClaim, set bool) string {
	t.Helper()
	doc := fieldCluster(m)
	if set {
		switch {
		case c.set != nil:
			c.set(doc["spec"].(map[string]any))
		case strings.HasPrefix(field, "spec."):
			setPath(doc["spec"].(map[string]any), strings.TrimPrefix(field, "spec."), c.value)
		default:
			setPath(doc, field, c.value)
		}
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// renderClaim renders the claim's template (or task) for the cluster.yaml.
func renderClaim(t *testing.T, c fieldClaim, clusterYAML string) string {
	t.Helper()
	vars := hostVars(t, clusterYAML, c.host)
	for k, v := range c.vars {
		vars[k] = v
	}
	for _, d := range c.deps {
		vars = withRoleDefaults(t, d, vars, nil)
	}
	vars = withRoleDefaults(t, c.role, withEtcdTuning(t, vars), nil)
	if c.taskName == "" {
		return renderRoleTemplate(t, c.role, c.tmpl, vars)
	}
	tk := roleTask(t, c.role, c.taskFile, c.taskName)
	for _, k := range []string{"name", "when", "tags"} {
		delete(tk, k)
	}
	out, err := eval.New().RenderValue(map[string]any(tk), vars)
	if err != nil {
		t.Fatalf("roles/%s/tasks/%s %q: %v", c.role, c.taskFile, c.taskName, err)
	}
	b, err := yaml.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// inventoryText is what the engine gets of the cluster besides spec: hosts
// (with their connection and bastion), groups and variables.
func inventoryText(t *testing.T, clusterYAML string) string {
	t.Helper()
	c, _, err := validate.ParseWith("cluster.yaml", []byte(clusterYAML), nil)
	if err != nil {
		t.Fatalf("cluster.yaml: %v\n%s", err, clusterYAML)
	}
	inv, err := schema.Inventory(c, "test")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, h := range inv.Hosts {
		fmt.Fprintf(&b, "%+v\n", h)
		if h.Bastion != nil {
			fmt.Fprintf(&b, "%+v\n", *h.Bastion)
		}
	}
	vars := map[string]any{}
	for k, v := range inv.Vars {
		if k != "spec" {
			vars[k] = v
		}
	}
	fmt.Fprintf(&b, "%v\n%v\n%v\n", inv.Groups, inv.GroupVars, vars)
	return b.String()
}

var testFuncs = map[string]bool{}

// testExists says whether a test function of that name is in the module.
func testExists(t *testing.T, name string) bool {
	t.Helper()
	if len(testFuncs) == 0 {
		re := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
		err := filepath.WalkDir(moduleRoot(t), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, "_test.go") {
				return err
			}
			data, err := os.ReadFile(p)
			for _, m := range re.FindAllSubmatch(data, -1) {
				testFuncs[string(m[1])] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return testFuncs[name]
}

func TestEveryFieldAppliedOrRefused(t *testing.T) {
	claims := fieldClaims()
	leaves := schema.LeafFields()
	for f := range claims {
		if !slices.Contains(leaves, f) {
			t.Errorf("%s: a claim for a field schema.Cluster does not have", f)
		}
	}
	root := moduleRoot(t)
	counts := map[fieldMode]map[string]int{}
	for _, m := range fieldModes {
		counts[m] = map[string]int{}
	}
	for _, f := range leaves {
		for _, m := range fieldModes {
			var cs []fieldClaim
			for _, c := range claims[f] {
				if c.in(m) {
					cs = append(cs, c)
				}
			}
			if len(cs) == 0 {
				t.Errorf("%s with %s: neither applied by a role nor refused (issue 46): apply it, refuse it (roles/support.yaml or validation), or claim it in fieldClaims", f, m)
				continue
			}
			kinds := map[string]bool{}
			for _, c := range cs {
				t.Run(f+"/"+m.kube+"-"+m.etcd+"/"+c.kind(), func(t *testing.T) {
					if err := checkClaim(t, root, f, m, c); err != "" {
						t.Errorf("%s with %s (%s): %s", f, m, c.kind(), err)
					}
				})
				kinds[c.kind()] = true
			}
			// A field is counted once per mode: refused if that is what
			// holds, else by the strongest proof of its application.
			for _, k := range []string{"refused", "rendered", "inventory", "read"} {
				if kinds[k] {
					counts[m][k]++
					break
				}
			}
		}
	}
	var lines []string
	for _, m := range fieldModes {
		c := counts[m]
		lines = append(lines, fmt.Sprintf("%-44s applied %3d (rendered %d, inventory %d, read %d), refused %3d",
			m.String()+":", c["rendered"]+c["inventory"]+c["read"], c["rendered"], c["inventory"], c["read"], c["refused"]))
	}
	sort.Strings(lines)
	t.Logf("%d leaf fields of cluster.yaml per mode:\n%s", len(leaves), strings.Join(lines, "\n"))
}

// checkClaim returns what does not hold of the claim, or "".
func checkClaim(t *testing.T, root, field string, m fieldMode, c fieldClaim) string {
	t.Helper()
	switch c.kind() {
	case "rendered":
		with := renderClaim(t, c, claimYAML(t, field, m, c, true))
		if !strings.Contains(with, c.want) {
			return fmt.Sprintf("roles/%s %s%s does not hold %q with the field set:\n%s", c.role, c.tmpl, c.taskName, c.want, with)
		}
		if strings.Contains(renderClaim(t, c, claimYAML(t, field, m, c, false)), c.want) {
			return fmt.Sprintf("roles/%s %s%s holds %q without the field too: not a proof", c.role, c.tmpl, c.taskName, c.want)
		}
	case "inventory":
		if !strings.Contains(inventoryText(t, claimYAML(t, field, m, c, true)), c.want) {
			return fmt.Sprintf("%q does not reach the inventory", c.want)
		}
		if strings.Contains(inventoryText(t, claimYAML(t, field, m, c, false)), c.want) {
			return fmt.Sprintf("the inventory holds %q without the field too: not a proof", c.want)
		}
	case "refused":
		y := claimYAML(t, field, m, c, true)
		if _, _, err := validate.ParseWith("cluster.yaml", []byte(y), nil); err == nil {
			return "config validate accepts it:\n" + y
		} else if name := cmpOr(c.names, field[strings.LastIndex(field, ".")+1:]); !strings.Contains(err.Error(), strings.TrimSuffix(name, "[*]")) {
			return fmt.Sprintf("refused without naming the field: %v", err)
		}
		if _, _, err := validate.ParseWith("cluster.yaml", []byte(claimYAML(t, field, m, c, false)), nil); err != nil {
			return fmt.Sprintf("the mode's cluster.yaml is refused without the field too: %v", err)
		}
	case "read":
		// The needle must name the field, so that a claim cannot point at a
		// file that merely mentions something near it.
		if last := strings.TrimSuffix(field[strings.LastIndex(field, ".")+1:], "[*]"); !strings.Contains(strings.ToLower(c.needle), strings.ToLower(last)) {
			return fmt.Sprintf("the needle %q does not name the field (%s): not a proof that %s reads it", c.needle, last, c.file)
		}
		data, err := os.ReadFile(filepath.Join(root, c.file))
		if err != nil || !strings.Contains(string(data), c.needle) {
			return fmt.Sprintf("%s does not read it (no %q): %v", c.file, c.needle, err)
		}
		if !testExists(t, c.test) {
			return fmt.Sprintf("no test %s checks it", c.test)
		}
	}
	return ""
}
