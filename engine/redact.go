package engine

import "github.com/mensylisir/kubexm/engine/journal"

// Redactor returns the function that masks secrets (and their escaped,
// quoted and encoded forms) in text, as a run masks its events: for output
// that reaches a caller some other way (the error a `kubexm play` child of
// a server's worker printed).
func Redactor(secrets []string) func(string) string {
	return journal.NewMasker(secrets).Str
}
