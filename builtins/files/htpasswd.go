package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/internal/textdiff"
)

// htpasswdBuiltin keeps an htpasswd file holding one account, its password
// hashed with bcrypt. Since bcrypt salts every hash anew, the file cannot be
// compared with a freshly made one: the stored hash is verified against the
// password instead, and the file rewritten only when that fails. No other
// trace of the password (an unsalted digest kept to notice a change) is
// needed, and none reaches the host, the result, a diff or the journal.
type htpasswdBuiltin struct{}

func (htpasswdBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "htpasswd",
		Summary: "Keep an htpasswd file holding one account, its password hashed with bcrypt.",
		Doc: "The file is read from the host and its entry for `username` verified against `password` with bcrypt " +
			"(the stored hash's own salt): when it verifies at `cost` and the file holds no other line, nothing is written " +
			"(mode and owner are still corrected). Otherwise the file is replaced by `username:<bcrypt hash>`. " +
			"Neither the password nor a hash is shown: a --diff names the account and says the hash changed.",
		Args: append([]step.Arg{
			{Name: "path", Type: step.String, Required: true, Aliases: []string{"dest"}, Doc: "The htpasswd file on the host."},
			{Name: "username", Type: step.String, Required: true, Doc: "The account's name (no ':' and no line break)."},
			{Name: "password", Type: step.String, Required: true, Doc: "The account's password (at most 72 bytes, bcrypt's limit)."},
			{Name: "cost", Type: step.Int, Default: bcrypt.DefaultCost, Doc: "bcrypt's cost, 4-31: each step doubles the work of hashing and of every check against the hash (a server that checks it on each request, as a registry does, pays it per request). A stored hash of another cost is rewritten."},
		}, onhost.AttrArgs()...),
		Examples: []string{"htpasswd:\n  path: /etc/kubexm/registry/htpasswd\n  username: \"{{ .registry_auth.username }}\"\n" +
			"  password: \"{{ .registry_auth.password }}\"\n  mode: \"0600\""},
	}
}

func (htpasswdBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	path, user, pw, cost := args.String("path"), args.String("username"), args.String("password"), args.Int("cost")
	if cost < bcrypt.MinCost || cost > bcrypt.MaxCost {
		return step.Result{}, fmt.Errorf("htpasswd: cost %d: bcrypt takes %d to %d", cost, bcrypt.MinCost, bcrypt.MaxCost)
	}
	if user == "" || strings.ContainsAny(user, ":\r\n") {
		return step.Result{}, fmt.Errorf("htpasswd: username %q must be non-empty, without ':' or a line break", user)
	}
	if pw == "" || strings.ContainsAny(pw, "\r\n") {
		return step.Result{}, errors.New("htpasswd: the password must be non-empty, without a line break")
	}
	if len(pw) > 72 {
		return step.Result{}, fmt.Errorf("htpasswd: the password of %s is %d bytes; bcrypt takes at most 72 (hint: choose a shorter one)", user, len(pw))
	}
	fi, err := env.Target.Stat(ctx, path, env.Become)
	if err != nil {
		return step.Result{}, err
	}
	if fi.IsDir {
		return step.Result{}, fmt.Errorf("%s: htpasswd: %s is a directory", env.Target.Host(), path)
	}
	data := map[string]any{"path": path, "username": user}
	var old []byte
	if fi.Exists {
		if old, _, err = onhost.ReadFile(ctx, env, path); err != nil {
			return step.Result{}, err
		}
		if htpasswdHolds(old, user, pw, cost) {
			changes, err := onhost.FixAttrs(ctx, env, path, fi, onhost.AttrsFrom(args))
			if err != nil {
				return step.Result{}, err
			}
			return step.Result{Changed: len(changes) > 0, Msg: strings.Join(changes, ", "), Data: data}, nil
		}
	}
	res := step.Result{Changed: true, Data: data}
	if env.Diff {
		res.Diff = textdiff.Unified(path, htpasswdMasked(old), []byte(user+":(a new bcrypt hash)\n"), fi.Exists)
	}
	if env.Check {
		res.Msg = "would write " + path + " (account " + user + ")"
		return res, nil
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(pw), cost)
	if err != nil {
		return step.Result{}, fmt.Errorf("htpasswd: hash the password of %s: %w", user, err)
	}
	content := []byte(user + ":" + string(hash) + "\n")
	if err := env.Target.Put(ctx, bytes.NewReader(content), path, onhost.PutOptions(env, fi, onhost.AttrsFrom(args))); err != nil {
		return step.Result{}, err
	}
	res.Msg = "wrote " + path + " (account " + user + ")"
	return res, nil
}

// htpasswdHolds says whether content is exactly one entry, user's, whose
// bcrypt hash of cost verifies pw.
func htpasswdHolds(content []byte, user, pw string, cost int) bool {
	lines := strings.Split(strings.TrimRight(string(content), "\n"), "\n")
	if len(lines) != 1 {
		return false
	}
	name, hash, ok := strings.Cut(lines[0], ":")
	if !ok || name != user {
		return false
	}
	if c, err := bcrypt.Cost([]byte(hash)); err != nil || c != cost {
		return false
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(pw)) == nil
}

// htpasswdMasked is content with every hash replaced by a placeholder, for
// a --diff that names the accounts and never shows a hash.
func htpasswdMasked(content []byte) []byte {
	if len(content) == 0 {
		return nil
	}
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(string(content), "\n"), "\n") {
		if name, _, ok := strings.Cut(l, ":"); ok {
			l = name + ":(its old hash)"
		} else {
			l = "(a line that is not an entry)"
		}
		b.WriteString(l + "\n")
	}
	return []byte(b.String())
}
