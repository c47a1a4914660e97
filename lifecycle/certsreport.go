package lifecycle

import (
	"encoding/json"
	"fmt"
)

// CertsReport is the report CertsCheckPlaybook writes (certs_report_path):
// one entry per file and host.
type CertsReport struct {
	Cluster        string      `json:"cluster"`
	WarnWithinDays int         `json:"warn_within_days"`
	Problems       int         `json:"problems"`
	Certificates   []CertEntry `json:"certificates"`
}

// CertEntry is one certificate, kubeconfig or service-account key of a
// host.
type CertEntry struct {
	Host        string   `json:"host"`
	Path        string   `json:"path"`
	Status      string   `json:"status"`
	Exists      bool     `json:"exists"`
	Kind        string   `json:"kind"`
	CommonName  string   `json:"common_name"`
	Issuer      string   `json:"issuer"`
	NotAfter    string   `json:"not_after"`
	DaysLeft    *int     `json:"days_left"`
	IsCA        bool     `json:"is_ca"`
	Serial      string   `json:"serial"`
	KeyType     string   `json:"key_type"`
	Fingerprint string   `json:"fingerprint"`
	SANs        CertSANs `json:"sans"`
}

// CertSANs are a certificate's subject alternative names.
type CertSANs struct {
	DNS []string `json:"dns"`
	IPs []string `json:"ips"`
}

// ParseCertsReport reads a report of CertsCheckPlaybook; where says where
// it was read from (of the playbook, of the server).
func ParseCertsReport(data []byte, where string) (*CertsReport, error) {
	var r CertsReport
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("the certs-check report %s: %w", where, err)
	}
	return &r, nil
}
