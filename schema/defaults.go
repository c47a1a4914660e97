package schema

import (
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/schema/internal/valid"
)

// Default versions: the newest patch of the newest Kubernetes minor of the
// support matrix (roles/support.yaml; a test keeps them equal) and the
// etcd and containerd releases the roles install by default.
const (
	DefaultKubernetesVersion = "v1.37.2"
	DefaultEtcdVersion       = "v3.7.3"
)

// defaultRuntimeVersion is the version installed for each container runtime
// when none is given. Only containerd is installed (roles/support.yaml); the
// others keep a version so that `config view` of a refused file still reads
// sensibly.
// MinimalCluster is the smallest valid cluster.yaml: one host in every
// role and every choice at its default, for what kubexm says of its
// defaults (kubexm version, kubexm explain) without a file of the user's.
const MinimalCluster = `apiVersion: ` + APIVersion + `
kind: ` + Kind + `
metadata: {name: defaults}
spec:
  hosts: [{name: n1, address: 192.0.2.1}]
  roleGroups: {etcd: [n1], master: [n1], worker: [n1]}
`

// DefaultArch is a host's architecture when cluster.yaml names none. The
// inventory also gives it to the control machine (localhost), so roles
// read `arch` without a default of their own.
const DefaultArch = "amd64"

func defaultRuntimeVersion(runtime string) string {
	switch runtime {
	case "containerd":
		return "2.4.2"
	case "docker":
		// The static release roles/docker installs (test/artifacts/docker.sh).
		return "29.9.3"
	case "cri-o":
		return "1.33.0"
	case "isula":
		return "2.1.5"
	}
	return ""
}

// SetDefaults fills every field the user left empty. It is the only place
// defaults live, so `kubexm config view` shows exactly what a run uses.
//
// The defaults are choices this kubexm installs (roles/support.yaml):
// binaries (kubernetes.type kubexm), containerd, flannel, no internal load
// balancer and no registry deployment. The seeds' KubeKey-era feature gate
// defaults (ExpandCSIVolumes, TTLAfterFinished, ...) are deliberately not
// applied: those gates were removed from Kubernetes.
func SetDefaults(c *Cluster) {
	if c.APIVersion == "" {
		c.APIVersion = APIVersion
	}
	if c.Kind == "" {
		c.Kind = Kind
	}
	s := &c.Spec

	for i := range s.Hosts {
		h := &s.Hosts[i]
		setStr(&h.User, "root")
		setInt(&h.Port, 22)
		setStr(&h.Arch, DefaultArch)
		if h.Connection == "" {
			h.Connection = "ssh"
			if valid.IsLocalAddress(h.Address) {
				h.Connection = "local"
			}
		}
	}

	cpe := &s.ControlPlaneEndpoint
	setStr(&cpe.Domain, "lb.kubexm.local")
	setInt(&cpe.Port, 6443)

	k := &s.Kubernetes
	setStr(&k.Type, "kubexm")
	setStr(&k.Version, DefaultKubernetesVersion)
	if !strings.HasPrefix(k.Version, "v") && k.Version != "" && k.Version[0] >= '0' && k.Version[0] <= '9' {
		k.Version = "v" + k.Version
	}
	setStr(&k.ClusterName, "cluster.local")
	setInt(&k.MaxPods, 110)
	setInt(&k.PodPidsLimit, 10000)
	setInt(&k.NodeCidrMaskSize, 24)
	setStr(&k.ProxyMode, "iptables")
	cr := &k.ContainerRuntime
	setStr(&cr.Type, "containerd")
	if cr.Type == "custom" {
		setStr(&cr.CustomRole, "custom-runtime")
	}
	if rs := cr.settings(); rs != nil {
		setStr(&cr.Version, rs.Version)
	}
	setStr(&cr.Version, defaultRuntimeVersion(cr.Type))

	e := &s.Etcd
	setStr(&e.Type, "kubexm")
	if e.Type == "kubeadm" && len(s.RoleGroups.Etcd) == 0 {
		// kubeadm stacks an etcd member on every master.
		s.RoleGroups.Etcd = slices.Clone(s.RoleGroups.Master)
	}
	// The settings of a member kubexm runs (validateEtcdMode refuses them
	// with an external etcd); the stacked member's version is kubeadm's.
	if e.Type != "external" {
		if e.Type != "kubeadm" {
			setStr(&e.Version, DefaultEtcdVersion)
		}
		setStr(&e.DataDir, "/var/lib/etcd")
		setInt(&e.HeartbeatInterval, 250)
		setInt(&e.ElectionTimeout, 5000)
		setInt(&e.SnapshotCount, 10000)
		setIntPtr(&e.AutoCompactionRetention, 8)
		setStr(&e.Metrics, "basic")
		setInt64(&e.QuotaBackendBytes, 2*1024*1024*1024)
		setInt64(&e.MaxRequestBytes, 1572864)
		setIntPtr(&e.MaxWals, 5)
		setStr(&e.LogLevel, "info")
	}
	if e.Type == "kubexm" {
		setStr(&e.BackupDir, "/var/backups/kube_etcd")
		setInt(&e.KeepBackupNumber, 5)
	}

	n := &s.Network
	setStr(&n.Plugin, "flannel")
	setStr(&n.KubePodsCIDR, "10.233.64.0/18")
	setStr(&n.KubeServiceCIDR, "10.233.0.0/18")
	switch n.Plugin {
	case "custom":
		setStr(&n.CustomRole, "custom-cni")
	case "calico":
		if n.Calico == nil {
			n.Calico = &Calico{}
		}
		// vxlan unless ipip is asked for: vxlan needs no BGP and no ipip
		// module (kernels without it exist, the test machines' among them).
		// Only one of the two may be on, so a mode set alone decides the
		// other; vxlanMode Never alone means ipip, KubeKey's default.
		switch {
		case n.Calico.IPIPMode == "" && n.Calico.VXLANMode == "":
			n.Calico.IPIPMode, n.Calico.VXLANMode = "Never", "Always"
		case n.Calico.VXLANMode == "":
			n.Calico.VXLANMode = "Never"
		case n.Calico.IPIPMode == "" && n.Calico.VXLANMode == "Never":
			n.Calico.IPIPMode = "Always"
		case n.Calico.IPIPMode == "":
			n.Calico.IPIPMode = "Never"
		}
		setInt(&n.IPPool.BlockSize, 26)
	case "flannel":
		if n.Flannel == nil {
			n.Flannel = &Flannel{}
		}
		setStr(&n.Flannel.BackendMode, "vxlan")
	case "cilium":
		if n.Cilium == nil {
			n.Cilium = &Cilium{}
		}
		setStr(&n.Cilium.TunnelMode, "vxlan")
	}

	if d := s.DNS.NodeLocalDNS; d != nil {
		if d.Enabled == nil {
			on := true
			d.Enabled = &on
		}
		setStr(&d.LocalIP, "169.254.25.10")
	}

	if s.Storage.OpenEBS != nil {
		setStr(&s.Storage.OpenEBS.BasePath, "/var/openebs/local")
	}

	r := &s.Registry
	setStr(&r.ContainerdDataDir, "/var/lib/containerd")
	if r.Type == "registry" {
		setStr(&r.RegistryDataDir, "/var/lib/kubexm-registry")
	}
	if cr.Type == "docker" {
		setStr(&r.DockerDataDir, "/var/lib/docker")
	}
}

// settings returns the block for the selected runtime, if written.
func (cr *ContainerRuntime) settings() *RuntimeSettings {
	switch cr.Type {
	case "containerd":
		return cr.Containerd
	case "docker":
		return cr.Docker
	case "cri-o":
		return cr.Crio
	case "isula":
		return cr.Isula
	}
	return nil
}

func setStr(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func setInt(p *int, v int) {
	if *p == 0 {
		*p = v
	}
}

func setInt64(p *int64, v int64) {
	if *p == 0 {
		*p = v
	}
}

func setIntPtr(p **int, v int) {
	if *p == nil {
		*p = &v
	}
}
