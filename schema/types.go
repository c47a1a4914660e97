// Package schema owns the cluster.yaml format: its Go types, parsing with
// positions, defaults, validation, KubeKey v3 conversion and the engine
// inventory built from it.
//
// The yaml tags are the file's key names; `doc` and `enum` tags feed the
// generated JSON Schema (cluster.schema.json), so editors show the same
// documentation as `kubexm config view`.
package schema

// APIVersion and Kind identify a kubexm cluster file, and the Cluster
// resource in the API (crdGroup, crdVersion: see CRD).
const (
	crdGroup   = "kubexm.mensylisir.io"
	crdVersion = "v1alpha1"
	APIVersion = crdGroup + "/" + crdVersion
	Kind       = "Cluster"
)

// Cluster is one cluster.yaml document.
type Cluster struct {
	APIVersion string   `yaml:"apiVersion" doc:"Always kubexm.mensylisir.io/v1alpha1 (KubeKey's kubekey.kubesphere.io/v1alpha2 is converted)."`
	Kind       string   `yaml:"kind" doc:"Always Cluster."`
	Metadata   Metadata `yaml:"metadata"`
	Spec       Spec     `yaml:"spec"`

	// src remembers where the cluster came from, so validation and later
	// messages can point at file:line:col. It is not part of the format.
	src *source
}

// Metadata names the cluster.
type Metadata struct {
	Name string `yaml:"name" doc:"Cluster name; also the work directory .kubexm/<name>. DNS-1123 subdomain."`
}

// Spec is the desired cluster.
type Spec struct {
	Hosts                []Host               `yaml:"hosts" doc:"Every machine of the cluster."`
	Bastion              *Bastion             `yaml:"bastion,omitempty" doc:"Jump host for every host that names none of its own."`
	RoleGroups           RoleGroups           `yaml:"roleGroups" doc:"Which hosts play which role; members may be ranges such as node[5:6]."`
	RoleGroupVars        map[string]VarMap    `yaml:"roleGroupVars,omitempty" doc:"Variables per inventory group (all, etcd, master, control_plane, worker, k8s_cluster, registry, loadbalancer), as Ansible's group vars; group_vars/<group>.yaml beside the cluster file adds to them."`
	ControlPlaneEndpoint ControlPlaneEndpoint `yaml:"controlPlaneEndpoint"`
	System               System               `yaml:"system"`
	Kubernetes           Kubernetes           `yaml:"kubernetes"`
	Etcd                 Etcd                 `yaml:"etcd"`
	Network              Network              `yaml:"network"`
	Storage              Storage              `yaml:"storage"`
	Registry             Registry             `yaml:"registry"`
	Addons               []Addon              `yaml:"addons,omitempty" choice:"value" doc:"Add-ons to install (KubeKey's format): a name kubexm installs itself (metrics-server), or an add-on of your own from YAML manifests (sources.yaml) or a local Helm chart (sources.chart); see docs/guide.md#add-ons."`
	DNS                  DNS                  `yaml:"dns"`
	Extra                Extra                `yaml:"extra"`
	Hooks                []Hook               `yaml:"hooks,omitempty" doc:"Hook playbooks run before or after a phase of a playbook (kubexm play --list-tasks names the phases); see docs/playbooks.md#hooks."`
	Operator             Operator             `yaml:"operator" doc:"Operator mode's controller in the cluster (docs/guide.md, operator mode)."`
}

// Operator is operator mode's controller running in the cluster itself.
type Operator struct {
	Enabled bool `yaml:"enabled,omitempty" doc:"Run kubexm controller in the cluster (roles/kubexm-controller, at the end of create-cluster): a Deployment on the masters with leader election, its image built from this kubexm binary and side-loaded on the masters, its RBAC, and a Secret holding the hosts' SSH key. Needs every remote host (and bastion) reached with one private key, without passphrase or password. Default false; false removes what true installed."`
}

// Addon is one entry of spec.addons. A plain string is the name of an
// add-on kubexm installs itself (metrics-server); an entry with sources is
// one of the user's, from manifests or a chart (KubeKey's format). Paths
// are relative to the cluster file.
type Addon struct {
	Name      string        `yaml:"name" scalar:"true" doc:"The add-on's name: a built-in one (metrics-server), or the name of your add-on (its Helm release name; a DNS-1123 label, at most 53 characters)."`
	Namespace string        `yaml:"namespace,omitempty" doc:"Namespace of the manifests' namespaced objects that name none, and of the Helm release. Default: default."`
	Sources   *AddonSources `yaml:"sources,omitempty" doc:"Where your add-on comes from: yaml or chart, not both."`
}

// AddonSources is where a user add-on comes from.
type AddonSources struct {
	Yaml  *AddonYaml  `yaml:"yaml,omitempty" doc:"Manifests applied with kubectl apply (server-side) from the first master."`
	Chart *AddonChart `yaml:"chart,omitempty" doc:"A Helm chart installed with the Helm SDK from the control machine."`
}

// AddonYaml lists the manifests of an add-on.
type AddonYaml struct {
	Path []string `yaml:"path" doc:"Manifest files (YAML, several documents each), relative to the cluster file; applied in order."`
}

// AddonChart is a Helm chart add-on.
type AddonChart struct {
	Name       string `yaml:"name,omitempty" doc:"The chart's name; when set, the chart at path must have it."`
	Repo       string `yaml:"repo,omitempty" doc:"The chart repository it was pulled from (informative; kubexm installs from path, download the chart with helm pull --repo REPO NAME --version VERSION)."`
	Path       string `yaml:"path,omitempty" doc:"The chart: a packaged .tgz or a chart directory, relative to the cluster file. Required."`
	Version    string `yaml:"version,omitempty" doc:"The chart's version; when set, the chart at path must have it."`
	ValuesFile string `yaml:"valuesFile,omitempty" doc:"A values file, relative to the cluster file."`
	Values     any    `yaml:"values,omitempty" doc:"Values over valuesFile's: a mapping, or KubeKey's list of key=value entries (helm --set syntax)."`
}

// Kind is what installs the add-on: builtin (a role of kubexm's), yaml or
// chart. An entry with both or neither source is a validation error; it is
// chart when it has one.
func (a Addon) Kind() string {
	switch {
	case a.Sources == nil || a.Sources.Yaml == nil && a.Sources.Chart == nil:
		return AddonBuiltin
	case a.Sources.Chart != nil:
		return AddonChartKind
	}
	return AddonYamlKind
}

// The kinds of add-on (Addon.Kind), also the support matrix's values of
// spec.addons[*] for the user's add-ons: "(yaml)" and "(chart)".
const (
	AddonBuiltin   = "builtin"
	AddonYamlKind  = "yaml"
	AddonChartKind = "chart"
)

// MatrixValue is the add-on's value in the support matrix: its name when
// kubexm installs it itself, else (yaml) or (chart).
func (a Addon) MatrixValue() string {
	if k := a.Kind(); k != AddonBuiltin {
		return "(" + k + ")"
	}
	return a.Name
}

// Hook is a playbook of the site's run before or after one phase of a
// kubexm playbook.
type Hook struct {
	Playbook string `yaml:"playbook" doc:"The playbook whose phase is hooked, e.g. create-cluster (its name: header)."`
	Phase    string `yaml:"phase" doc:"The phase, e.g. network; kubexm play PLAYBOOK --list-tasks lists a playbook's phases."`
	When     string `yaml:"when" doc:"before or after: right before the phase's first play; after: right after its last."`
	File     string `yaml:"file" doc:"The hook playbook (a list of plays), relative to the cluster file."`
}

// Host is one machine and how to reach it.
type Host struct {
	Name            string            `yaml:"name" doc:"Node name, unique, DNS-1123 subdomain."`
	Address         string            `yaml:"address" doc:"Address used to connect (IP or DNS name); localhost means the control machine."`
	InternalAddress string            `yaml:"internalAddress,omitempty" doc:"Cluster-internal IP; \"IPv4,IPv6\" for dual stack. Default: address."`
	Port            int               `yaml:"port,omitempty" doc:"SSH port. Default 22."`
	User            string            `yaml:"user,omitempty" doc:"SSH user. Default root."`
	Password        string            `yaml:"password,omitempty" doc:"SSH password; ${ENV_VAR} reads it from the environment. Never printed."`
	PasswordFile    string            `yaml:"passwordFile,omitempty" doc:"File holding the SSH password (relative to cluster.yaml)."`
	PrivateKeyPath  string            `yaml:"privateKeyPath,omitempty" doc:"SSH private key. Default ~/.ssh/id_rsa when it exists."`
	Passphrase      string            `yaml:"privateKeyPassphrase,omitempty" doc:"Passphrase of an encrypted private key; ${ENV_VAR} reads it from the environment. Never printed."`
	SudoPassword    string            `yaml:"sudoPassword,omitempty" doc:"sudo password for a user other than root. Default: password. ${ENV_VAR} reads it from the environment. Never printed."`
	Bastion         *Bastion          `yaml:"bastion,omitempty" doc:"Jump host this host is reached through. Default: spec.bastion."`
	Connection      string            `yaml:"connection,omitempty" enum:"ssh,local" doc:"ssh or local (run commands directly). Default local for address localhost, else ssh."`
	Arch            string            `yaml:"arch,omitempty" enum:"amd64,arm64" doc:"CPU architecture. Default amd64."`
	Labels          map[string]string `yaml:"labels,omitempty" doc:"Kubernetes node labels."`
	Vars            VarMap            `yaml:"vars,omitempty" doc:"Variables of this host, as Ansible's host vars (over group vars); host_vars/<name>.yaml beside the cluster file adds to them."`
}

// VarMap is a set of playbook variables: identifier names, any YAML values.
type VarMap map[string]any

// Bastion is a jump host (ssh -J).
type Bastion struct {
	Address        string `yaml:"address" doc:"Address of the jump host."`
	Port           int    `yaml:"port,omitempty" doc:"SSH port. Default 22."`
	User           string `yaml:"user,omitempty" doc:"SSH user. Default: the host's user."`
	Password       string `yaml:"password,omitempty" doc:"${ENV_VAR} reads it from the environment. Never printed."`
	PrivateKeyPath string `yaml:"privateKeyPath,omitempty" doc:"Default: the host's key."`
	Passphrase     string `yaml:"privateKeyPassphrase,omitempty" doc:"Passphrase of an encrypted bastion key; default: the host's when the key is the host's. ${ENV_VAR} reads it from the environment. Never printed."`
}

// RoleGroups assigns roles to hosts by name.
type RoleGroups struct {
	Etcd         []string `yaml:"etcd,omitempty" doc:"etcd members (not with etcd.type external)."`
	Master       []string `yaml:"master,omitempty" doc:"Control-plane nodes; at least one."`
	Worker       []string `yaml:"worker,omitempty" doc:"Worker nodes."`
	Registry     []string `yaml:"registry,omitempty" doc:"At most one host running the image registry."`
	Loadbalancer []string `yaml:"loadbalancer,omitempty" doc:"Hosts running keepalived and haproxy/nginx for externalLoadBalancer kubexm."`
}

// ControlPlaneEndpoint is how clients reach the API servers.
type ControlPlaneEndpoint struct {
	ExternalLoadBalancer string `yaml:"externalLoadBalancer,omitempty" enum:",kubexm,external" doc:"external: your own LB at lb_address; kubexm: keepalived and haproxy on the loadbalancer hosts, lb_address their virtual IP; empty: none."`
	InternalLoadbalancer string `yaml:"internalLoadbalancer,omitempty" enum:",haproxy,nginx,kube-vip" doc:"haproxy/nginx proxy on every worker, or kube-vip on the masters. Default none: nodes reach lb_address, else the first master."`
	ExternalDNS          bool   `yaml:"externalDNS,omitempty" doc:"The domain is resolved by your DNS; lb_address must then be empty unless kube-vip needs it."`
	Domain               string `yaml:"domain,omitempty" doc:"Control-plane domain name. Default lb.kubexm.local."`
	LBAddress            string `yaml:"lb_address,omitempty" doc:"Virtual IP of the load balancer (external and kubexm load balancers, kube-vip)."`
	Port                 int    `yaml:"port,omitempty" doc:"API server port. Default 6443."`
}

// System is OS-level preparation applied to every host.
type System struct {
	NTPServers []string `yaml:"ntpServers,omitempty" doc:"Chrony upstreams; a host name from hosts makes that host an NTP server."`
	Timezone   string   `yaml:"timezone,omitempty" doc:"Timezone for every host, e.g. Asia/Shanghai."`
	RPMs       []string `yaml:"rpms,omitempty" doc:"Extra packages on RPM systems."`
	Debs       []string `yaml:"debs,omitempty" doc:"Extra packages on Debian systems."`
}

// Kubernetes configures the Kubernetes components.
type Kubernetes struct {
	Type                   string           `yaml:"type,omitempty" enum:"kubeadm,kubexm" doc:"kubexm: binaries and systemd units; kubeadm: kubeadm init and join, the control plane as static pods (a converted KubeKey file is kubeadm). Default kubexm."`
	Version                string           `yaml:"version,omitempty" doc:"Kubernetes version: any patch of v1.35, v1.36 or v1.37 (kubexm support). Default v1.37.2."`
	APIServerCertExtraSans []string         `yaml:"apiserverCertExtraSans,omitempty" doc:"Extra IPs and names in the API server certificate."`
	ContainerRuntime       ContainerRuntime `yaml:"containerRuntime"`
	ClusterName            string           `yaml:"clusterName,omitempty" doc:"Cluster DNS domain. Default cluster.local."`
	AutoRenewCerts         bool             `yaml:"autoRenewCerts,omitempty" doc:"Install a systemd timer on the masters renewing their certificates that expire within 30 days (binary mode: kubexm reissues them; kubeadm mode: kubeadm certs renew all) and restarting the control plane. Default false."`
	MasqueradeAll          bool             `yaml:"masqueradeAll,omitempty" doc:"kube-proxy SNATs all traffic in iptables mode. Default false."`
	MaxPods                int              `yaml:"maxPods,omitempty" doc:"Pods per kubelet. Default 110."`
	PodPidsLimit           int              `yaml:"podPidsLimit,omitempty" doc:"PIDs per pod. Default 10000."`
	NodeCidrMaskSize       int              `yaml:"nodeCidrMaskSize,omitempty" doc:"Prefix length of each node's pod range. Default 24."`
	ProxyMode              string           `yaml:"proxyMode,omitempty" enum:"ipvs,iptables,nftables" doc:"kube-proxy mode. Default iptables. ipvs needs the kernel's IPVS modules and runs on no test machine (their kernel has no IP_VS); nftables needs the nft command, which kubexm does not install."`
	FeatureGates           map[string]bool  `yaml:"featureGates,omitempty" doc:"Feature gates for every component. Default none."`
	KubeProxyConfiguration map[string]any   `yaml:"kubeProxyConfiguration,omitempty" doc:"Merged into the KubeProxyConfiguration."`
	KubeletArgs            []string         `yaml:"kubeletArgs,omitempty" doc:"Extra kubelet flags, e.g. --root-dir=/var/lib/kubelet."`
}

// ContainerRuntime selects and configures the CRI runtime.
type ContainerRuntime struct {
	Type       string           `yaml:"type,omitempty" enum:"containerd,docker,cri-o,isula,custom" doc:"Runtime; custom runs your own role (customRole). Default containerd."`
	CustomRole string           `yaml:"customRole,omitempty" doc:"With type custom: the role that installs the runtime (tasks/main.yaml) and removes it (tasks/delete.yaml), searched as include_role searches. Default custom-runtime."`
	Version    string           `yaml:"version,omitempty" doc:"Runtime version. Default depends on type (containerd 2.4.2, docker 29.9.3)."`
	Containerd *RuntimeSettings `yaml:"containerd,omitempty" doc:"Settings when type is containerd."`
	Docker     *RuntimeSettings `yaml:"docker,omitempty" doc:"Settings when type is docker."`
	Crio       *RuntimeSettings `yaml:"crio,omitempty" doc:"Settings when type is cri-o."`
	Isula      *RuntimeSettings `yaml:"isula,omitempty" doc:"Settings when type is isula."`
}

// RuntimeSettings are the per-runtime options.
type RuntimeSettings struct {
	Version            string   `yaml:"version,omitempty" doc:"Same as containerRuntime.version; they must agree."`
	RegistryMirrors    []string `yaml:"registryMirrors,omitempty" doc:"Registry mirrors (a single string is one mirror)."`
	InsecureRegistries []string `yaml:"insecureRegistries,omitempty" doc:"Registries reached without TLS verification."`
}

// Etcd configures the etcd cluster.
type Etcd struct {
	Type                    string        `yaml:"type,omitempty" enum:"kubexm,kubeadm,external" doc:"kubexm: binaries on the etcd hosts; external: an existing cluster; kubeadm: a stacked member on every master (kubernetes.type kubeadm). Default kubexm."`
	Version                 string        `yaml:"version,omitempty" doc:"etcd version, a v3.6 or v3.7 release (etcd.type kubexm; kubeadm's stacked member runs the image its Kubernetes version pins). Default v3.6.16."`
	External                *EtcdExternal `yaml:"external,omitempty" doc:"Only with type external."`
	DataDir                 string        `yaml:"dataDir,omitempty" doc:"Default /var/lib/etcd."`
	HeartbeatInterval       int           `yaml:"heartbeatInterval,omitempty" doc:"Milliseconds. Default 250."`
	ElectionTimeout         int           `yaml:"electionTimeout,omitempty" doc:"Milliseconds, at least 5x heartbeatInterval. Default 5000."`
	SnapshotCount           int           `yaml:"snapshotCount,omitempty" doc:"Committed transactions per snapshot. Default 10000."`
	AutoCompactionRetention *int          `yaml:"autoCompactionRetention,omitempty" doc:"Hours; 0 disables. Default 8."`
	Metrics                 string        `yaml:"metrics,omitempty" enum:"basic,extensive" doc:"Default basic."`
	QuotaBackendBytes       int64         `yaml:"quotaBackendBytes,omitempty" doc:"Default 2147483648 (2 GiB)."`
	MaxRequestBytes         int64         `yaml:"maxRequestBytes,omitempty" doc:"Default 1572864."`
	MaxSnapshots            *int          `yaml:"maxSnapshots,omitempty" doc:"KubeKey's limit of etcd v3.5's v2 snapshot files; etcd v3.6 keeps none, so only 5 (KubeKey's value, meaning nothing here) is accepted."`
	MaxWals                 *int          `yaml:"maxWals,omitempty" doc:"0 is unlimited. Default 5."`
	LogLevel                string        `yaml:"logLevel,omitempty" enum:"debug,info,warn,error,panic,fatal" doc:"Default info."`
	BackupPeriod            int           `yaml:"backupPeriod,omitempty" doc:"Minutes between scheduled snapshots that a systemd timer takes on every etcd host (etcd.type kubexm); 0 schedules none. Default 0 (KubeKey's field, whose default was 1440)."`
	BackupDir               string        `yaml:"backupDir,omitempty" doc:"Where the scheduled snapshots go on each etcd host; delete leaves them. Default /var/backups/kube_etcd."`
	KeepBackupNumber        int           `yaml:"keepBackupNumber,omitempty" doc:"Scheduled snapshots kept on each host, the newest. Default 5."`
}

// EtcdExternal is an existing etcd cluster.
type EtcdExternal struct {
	Endpoints []string `yaml:"endpoints,omitempty" doc:"Client URLs, e.g. https://192.168.6.6:2379."`
	CAFile    string   `yaml:"caFile,omitempty" doc:"CA certificate; omit all three files when TLS is off."`
	CertFile  string   `yaml:"certFile,omitempty"`
	KeyFile   string   `yaml:"keyFile,omitempty"`
}

// Network configures the CNI plugin and address ranges.
type Network struct {
	Plugin          string   `yaml:"plugin,omitempty" enum:"calico,flannel,cilium,none,custom" doc:"CNI plugin; none installs nothing; custom runs your own role (customRole). Default flannel."`
	CustomRole      string   `yaml:"customRole,omitempty" doc:"With plugin custom: the role that installs the network (tasks/main.yaml) and removes it (tasks/delete.yaml), searched as include_role searches (the playbook's roles/, --roles-path, the built-in roles). Default custom-cni."`
	Calico          *Calico  `yaml:"calico,omitempty"`
	Flannel         *Flannel `yaml:"flannel,omitempty"`
	Cilium          *Cilium  `yaml:"cilium,omitempty"`
	KubePodsCIDR    string   `yaml:"kubePodsCIDR,omitempty" doc:"Pod range; \"v4,v6\" for dual stack. Default 10.233.64.0/18."`
	KubeServiceCIDR string   `yaml:"kubeServiceCIDR,omitempty" doc:"Service range; \"v4,v6\" for dual stack. Default 10.233.0.0/18."`
	IPPool          IPPool   `yaml:"ippool"`
}

// Calico settings.
type Calico struct {
	IPIPMode  string `yaml:"ipipMode,omitempty" enum:"Always,CrossSubnet,Never" doc:"IP-in-IP encapsulation (needs the kernel's ipip module; preflight checks). Default Never; Always when vxlanMode alone is set to Never."`
	VXLANMode string `yaml:"vxlanMode,omitempty" enum:"Always,CrossSubnet,Never" doc:"VXLAN encapsulation; must be Never unless ipipMode is Never; both Never: no encapsulation (routes over BGP). Default Always; Never when ipipMode alone is set."`
	VethMTU   int    `yaml:"vethMTU,omitempty" doc:"MTU of the pods' interfaces and the tunnel; 0 takes the smallest MTU of the nodes' interfaces less the encapsulation (vxlan 50, ipip 20)."`
}

// Flannel settings.
type Flannel struct {
	BackendMode string `yaml:"backendMode,omitempty" enum:"vxlan,host-gw" doc:"Default vxlan."`
}

// Cilium settings.
type Cilium struct {
	TunnelMode           string `yaml:"tunnelMode,omitempty" enum:"vxlan,geneve,disabled" doc:"Default vxlan."`
	KubeProxyReplacement bool   `yaml:"kubeProxyReplacement,omitempty" doc:"Replace kube-proxy with eBPF."`
}

// IPPool sizes the per-node blocks of the pod range.
type IPPool struct {
	BlockSize int `yaml:"blockSize,omitempty" doc:"Calico IPv4 block prefix length, 20..32. Default 26."`
}

// Storage configures storage add-ons.
type Storage struct {
	OpenEBS *OpenEBS `yaml:"openebs,omitempty"`
}

// OpenEBS local PV settings.
type OpenEBS struct {
	BasePath string `yaml:"basePath,omitempty" doc:"Base path of the local PV provisioner."`
}

// Registry is the image registry the cluster pulls from.
type Registry struct {
	Type              string                  `yaml:"type,omitempty" enum:"registry,harbor,external" doc:"external: an existing registry (privateRegistry); registry or harbor: deployed on the registry host. Default none."`
	PrivateRegistry   string                  `yaml:"privateRegistry,omitempty" doc:"Registry images are pulled from: host[:port], or host[:port]/project for an existing registry that keeps them under a project path (Harbor); auths are keyed by the host."`
	NamespaceOverride string                  `yaml:"namespaceOverride,omitempty" doc:"Project/namespace replacing the images' own."`
	Auths             map[string]RegistryAuth `yaml:"auths,omitempty" doc:"Credentials per registry host."`
	ContainerdDataDir string                  `yaml:"containerdDataDir,omitempty" doc:"Default /var/lib/containerd."`
	DockerDataDir     string                  `yaml:"dockerDataDir,omitempty" doc:"docker's data root (containerRuntime.type docker). Default /var/lib/docker with docker."`
	RegistryDataDir   string                  `yaml:"registryDataDir,omitempty" doc:"Registry storage on the registry host (registry.type registry); default /var/lib/kubexm-registry."`
	HarborConfig      map[string]any          `yaml:"harborConfig,omitempty" doc:"Values rendered into harbor.yml (type harbor)."`
}

// RegistryAuth is how to log in to one registry.
type RegistryAuth struct {
	Username      string `yaml:"username,omitempty"`
	Password      string `yaml:"password,omitempty" doc:"${ENV_VAR} reads it from the environment. Never printed."`
	PasswordFile  string `yaml:"passwordFile,omitempty" doc:"File holding the password (relative to cluster.yaml)."`
	SkipTLSVerify bool   `yaml:"skipTLSVerify,omitempty"`
	PlainHTTP     bool   `yaml:"plainHTTP,omitempty"`
	CertsPath     string `yaml:"certsPath,omitempty" doc:"Directory of the control machine (relative to cluster.yaml) with the registry's CA (*.crt) and a client certificate (*.cert, *.key); the nodes get it as containerd's certs.d/<host>/."`
}

// DNS configures CoreDNS and NodeLocal DNSCache.
type DNS struct {
	DNSEtcHosts  string        `yaml:"dnsEtcHosts,omitempty" doc:"hosts(5) lines CoreDNS serves."`
	CoreDNS      *CoreDNS      `yaml:"coredns,omitempty"`
	NodeLocalDNS *NodeLocalDNS `yaml:"nodelocaldns,omitempty"`
}

// CoreDNS settings.
type CoreDNS struct {
	AdditionalConfigs  string         `yaml:"additionalConfigs,omitempty"`
	ExternalZones      []ExternalZone `yaml:"externalZones,omitempty"`
	RewriteBlock       string         `yaml:"rewriteBlock,omitempty"`
	UpstreamDNSServers []string       `yaml:"upstreamDNSServers,omitempty"`
}

// NodeLocalDNS settings: the block being there turns NodeLocal DNSCache on.
type NodeLocalDNS struct {
	Enabled       *bool          `yaml:"enabled,omitempty" doc:"Default true when the nodelocaldns block is there; false keeps the block but installs nothing."`
	LocalIP       string         `yaml:"localIP,omitempty" doc:"The link-local address the cache listens on on every node and kubelet names as clusterDNS. Default 169.254.25.10."`
	ExternalZones []ExternalZone `yaml:"externalZones,omitempty"`
}

// ExternalZone forwards some zones to other name servers.
type ExternalZone struct {
	Zones       []string `yaml:"zones,omitempty"`
	Nameservers []string `yaml:"nameservers,omitempty"`
	Cache       int      `yaml:"cache,omitempty"`
	Rewrite     []string `yaml:"rewrite,omitempty"`
}

// Extra is additional name resolution written to every host.
type Extra struct {
	Hosts    []EtcHost    `yaml:"hosts,omitempty" doc:"Extra /etc/hosts entries."`
	Resolves []EtcResolve `yaml:"resolves,omitempty" doc:"Name servers added to resolv.conf (or systemd-resolved)."`
}

// EtcHost is one /etc/hosts entry.
type EtcHost struct {
	Domain  string `yaml:"domain"`
	Address string `yaml:"address"`
}

// EtcResolve is one name server.
type EtcResolve struct {
	Address string `yaml:"address"`
}
