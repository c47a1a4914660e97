// Package sample writes the sample cluster file of `kubexm create config`.
package sample

import (
	"fmt"
	"net"
	"strings"

	"github.com/mensylisir/kubexm/schema"

	"github.com/mensylisir/kubexm/schema/matrix"
)

// Config is the cluster file of `kubexm create config`: an
// all-in-one cluster named name at Kubernetes version, on the machine
// whose address is ip ("" for unknown). It writes only choices the matrix
// s supports; the comments list the other values, from the matrix, so
// they cannot drift from it.
func Config(s *matrix.Support, name, version, ip string) string {
	internal := "    # internalAddress: 192.168.0.10  # this machine's cluster IP; set it for a real cluster\n"
	if ip != "" {
		internal = fmt.Sprintf("    internalAddress: %s   # detected; the IP other nodes reach this machine on\n", ip)
	}
	others := func(field, written string) string { return otherChoices(s, field, written) }
	return fmt.Sprintf(sampleConfigText, schema.APIVersion, schema.Kind, name, internal,
		others("spec.controlPlaneEndpoint.externalLoadBalancer", ""),
		others("spec.controlPlaneEndpoint.internalLoadbalancer", ""),
		others("spec.kubernetes.type", "kubexm"),
		version, "supported: "+s.KubernetesRange(),
		others("spec.kubernetes.containerRuntime.type", "containerd"),
		others("spec.kubernetes.proxyMode", "iptables"),
		others("spec.etcd.type", "kubexm"),
		others("spec.network.plugin", "flannel"),
		others("spec.registry.type", "external"))
}

// otherChoices lists a choice's values: the supported ones besides the one
// written, and those not supported yet.
func otherChoices(s *matrix.Support, field, written string) string {
	ch := s.Choice(field)
	if ch == nil {
		return ""
	}
	var alt []string
	for _, v := range ch.Supported() {
		if v != written && !strings.HasPrefix(v, "(") {
			alt = append(alt, v)
		}
	}
	var out []string
	if len(alt) > 0 {
		out = append(out, "or "+strings.Join(alt, ", "))
	}
	var ns []string
	for _, v := range ch.NotSupported() {
		if !strings.HasPrefix(v, "(") {
			ns = append(ns, v)
		}
	}
	if len(ns) > 0 {
		out = append(out, "not supported yet: "+strings.Join(ns, ", "))
	}
	return strings.Join(out, "; ")
}

// sampleConfigText is the cluster file of `kubexm config create`, its
// choices and their alternatives filled in by SampleConfig.
const sampleConfigText = `# kubexm cluster file: an all-in-one cluster on this machine.
# Every default is shown by ` + "`kubexm config view -f <this file>`" + `;
# what this kubexm installs by ` + "`kubexm support`" + `;
# editors can complete and check it with schema/cluster.schema.json.
apiVersion: %s
kind: %s
metadata:
  name: %s
spec:
  hosts:
  # address: localhost runs commands on this machine without SSH.
  # A remote host: {name: node2, address: 192.168.0.11, user: root, privateKeyPath: ~/.ssh/id_rsa}
  # A password may be written as ${ENV_VAR} or read from passwordFile: <path>.
  - name: node1
    address: localhost
%s    # arch: amd64                 # or arm64
    # labels: {disk: ssd}
  roleGroups:
    # Members are host names; node[1:3] stands for node1, node2, node3.
    etcd: [node1]
    master: [node1]
    worker: [node1]
  controlPlaneEndpoint:
    # Nodes reach the API servers at lb_address:port when set (your own load
    # balancer: externalLoadBalancer: external), else at the first master.
    # externalLoadBalancer: %s
    # internalLoadbalancer: %s
    domain: lb.kubexm.local
    port: 6443
  system:
    # ntpServers: [ntp.aliyun.com]
    # timezone: Asia/Shanghai
  kubernetes:
    type: kubexm                  # binaries under systemd; %s
    version: %s               # %s
    containerRuntime:
      type: containerd            # %s
    clusterName: cluster.local
    proxyMode: iptables           # %s
  etcd:
    type: kubexm                  # binaries on the etcd hosts; %s
  network:
    plugin: flannel               # %s
    kubePodsCIDR: 10.233.64.0/18
    kubeServiceCIDR: 10.233.0.0/18
  registry:
    # type: external              # %s
    # privateRegistry: dockerhub.kubexm.local
    # auths:
    #   dockerhub.kubexm.local: {username: admin, password: ${REGISTRY_PASSWORD}}
  # extra:
  #   hosts: [{domain: git.example.local, address: 192.168.0.20}]
  #   resolves: [{address: 192.168.0.53}]
`

// LocalIPv4 guesses the address other nodes would reach this machine on:
// the first global unicast IPv4 of an interface that is up.
func LocalIPv4() string {
	ifaces, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.String()
			}
		}
	}
	return ""
}
