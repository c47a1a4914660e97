// Package e2e holds kubexm's end-to-end suites (build tag e2e, run with
// `make e2e`): each starts its own test machines with testhosts.Up, so they
// need root and systemd-nspawn, and they are slow.
package e2e
