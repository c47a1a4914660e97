package engine

// What a command that reaches hosts without a playbook (kubexm run command)
// shares with a run: the same host patterns and the same masking.

// Redactor returns the function that masks secrets (and their escaped,
// quoted and encoded forms) in text, as a run masks its events: for output
// that reaches a caller some other way (run command's, the error a
// `kubexm play` child of a server's worker printed).
func Redactor(secrets []string) func(string) string {
	return NewMasker(secrets).Str
}
