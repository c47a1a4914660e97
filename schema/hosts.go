package schema

// MaxHosts caps spec.hosts.
const MaxHosts = 10000
