package pki

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
)

// The stages of a CA rotation, in the order a rotation runs them.
const (
	stageBundle  = "bundle"
	stageAdd     = "add"
	stagePromote = "promote"
	stageRetire  = "retire"
)

type caTrust struct{}

func (caTrust) Spec() step.Spec {
	return step.Spec{
		Name:    "ca_trust",
		Summary: "Write a CA's trust bundle on the control machine, and step a rotation of that CA",
		Doc: `Keeps the trust bundle of a CA made with gen_cert (NAME.crt and NAME.key
in ` + "`path`" + `): NAME-bundle.crt holds every certificate a client or server
must trust for it, the current CA first. Outside a rotation that is NAME.crt
alone. Distribute the bundle wherever a component verifies a peer, and the
CA itself (NAME.crt) only where something signs with NAME.key.

A rotation replaces the CA without a moment in which a host trusts only
one of the two, in four stages that each write the bundle again:

- ` + "`add`" + `: a new CA, NAME-next.crt/.key (same common name and key type as the
  current one unless given), joins the bundle. Send the bundle everywhere
  before signing anything with the new CA.
- ` + "`promote`" + `: NAME becomes NAME-old and NAME-next becomes NAME, so gen_cert
  reissues every leaf from the new CA; the bundle still holds both.
- ` + "`retire`" + `: NAME-old leaves the bundle; its files are kept as backups
  (NAME-old.crt.<UTC timestamp>.bak).
- ` + "`bundle`" + ` (the default): only rewrites the bundle from the files there are,
  so a run between two stages keeps whatever the stage before sent.

Every stage can run again: ` + "`add`" + ` does nothing while NAME-next or NAME-old
exists, ` + "`promote`" + ` nothing once NAME-next is gone, ` + "`retire`" + ` nothing once
NAME-old is gone; a ` + "`promote`" + ` or ` + "`retire`" + ` interrupted between two renames is
finished by the next run of the same stage (any other stage refuses such a
directory and says so, and ` + "`retire`" + ` refuses while NAME-next exists).
A finished rotation's files that came back (NAME-next identical to NAME,
NAME-old identical to one of its backups) are removed by any stage, not
read as a rotation under way. In check mode nothing is written.

Results: ` + "`bundle`" + ` (the path), ` + "`cas`" + ` (how many certificates it holds),
` + "`rotation`" + ` (` + "`none`" + `, ` + "`added`" + ` while NAME-next exists, ` + "`promoted`" + ` while NAME-old exists).`,
		Control: true,
		Args: []step.Arg{
			{Name: "path", Type: step.String, Required: true, Aliases: []string{"dir"},
				Doc: "Directory of the CA, on the control machine; relative to the cluster work directory."},
			{Name: "name", Type: step.String, Default: "ca",
				Doc: "Base name of the CA: NAME.crt and NAME.key."},
			{Name: "stage", Type: step.String, Default: stageBundle, Choices: []string{stageBundle, stageAdd, stagePromote, stageRetire},
				Doc: "What to do besides writing the bundle: nothing, add a new CA, promote it, or retire the old one."},
			{Name: "common_name", Type: step.String, Aliases: []string{"cn"},
				Doc: "Common name of the CA that `add` makes; defaults to the current CA's."},
			{Name: "key_type", Type: step.String,
				Doc: "Key algorithm of the CA that `add` makes (" + strings.Join(KeyTypes(), ", ") + "); defaults to the current CA's."},
			{Name: "validity", Type: step.Any, Default: "10y",
				Doc: "Lifetime of the CA that `add` makes: a Go duration, days (\"3650d\") or years (\"10y\")."},
		},
		Examples: []string{
			`- name: trust bundle of the cluster CA
  ca_trust:
    path: certs/kubernetes
    name: ca`,
			`- name: rotation, stage 1 - a new cluster CA joins the bundle
  ca_trust:
    path: certs/kubernetes
    name: ca
    stage: add`,
		},
	}
}

// caFiles names the three generations of one CA.
type caFiles struct {
	dir, name string
}

func (f caFiles) path(gen, ext string) string {
	base := f.name
	if gen != "" {
		base += "-" + gen
	}
	return filepath.Join(f.dir, base+"."+ext)
}

func (f caFiles) bundlePath() string { return filepath.Join(f.dir, f.name+"-bundle.crt") }

func exists(p string) (bool, error) {
	_, err := os.Lstat(p)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// pair loads one generation; ok is false when neither file exists.
func (f caFiles) pair(gen string) (*Pair, bool, error) {
	crt, key := f.path(gen, "crt"), f.path(gen, "key")
	hasCrt, err := exists(crt)
	if err != nil {
		return nil, false, err
	}
	hasKey, err := exists(key)
	if err != nil {
		return nil, false, err
	}
	if !hasCrt && !hasKey {
		return nil, false, nil
	}
	if !hasKey {
		return nil, false, f.halfway(crt + " exists without its key")
	}
	if !hasCrt {
		return nil, false, f.halfway(key + " exists without its certificate")
	}
	p, err := loadCA(crt, key)
	if err != nil {
		return nil, false, f.halfway(err.Error())
	}
	return p, true, nil
}

func (f caFiles) halfway(why string) error {
	return fmt.Errorf("the CA %s is inconsistent: %s; a CA rotation may have stopped between two renames: run it again (kubexm play rotate-ca; ca_trust stage: promote or retire finishes it)",
		filepath.Join(f.dir, f.name), why)
}

func (caTrust) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	f := caFiles{dir: controlPath(env, args.String("path")), name: args.String("name")}
	if f.dir == "" {
		return step.Result{}, errors.New("path is required: the directory of the CA")
	}
	if f.name == "" || strings.ContainsAny(f.name, `/\`) || f.name == "." || f.name == ".." {
		return step.Result{}, fmt.Errorf("name %q must be a plain file base name such as \"ca\"", f.name)
	}
	stage := args.String("stage")
	if ok, err := exists(f.path("", "crt")); err != nil {
		return step.Result{}, err
	} else if !ok && stage != stagePromote {
		if env.Check {
			// gen_cert only said it would make the CA.
			return step.Result{Changed: true, Msg: "would write " + f.bundlePath() + " once the CA " + f.path("", "crt") + " exists",
				Data: map[string]any{"bundle": f.bundlePath()}}, nil
		}
		return step.Result{}, fmt.Errorf("no CA %s: make it with gen_cert (ca: true) first", f.path("", "crt"))
	}
	unlock, err := lockDir(ctx, f.dir)
	if err != nil {
		return step.Result{}, err
	}
	defer unlock()

	did, err := f.dropLeftovers(env.Check)
	if err != nil {
		return step.Result{}, err
	}
	// Under --check a removal above was not made, and the stage would read
	// the files it would change: the run says what it would do instead.
	if !env.Check || len(did) == 0 {
		var staged []string
		switch stage {
		case stagePromote:
			staged, err = f.promote(env.Check)
		case stageAdd:
			staged, err = f.add(env.Check, args)
		case stageRetire:
			staged, err = f.retire(env.Check, time.Now())
		}
		if err != nil {
			return step.Result{}, err
		}
		did = append(did, staged...)
	}
	if env.Check && len(did) > 0 {
		// The bundle depends on files the stage would have changed.
		return step.Result{Changed: true, Msg: "would " + strings.Join(did, ", ") + " and rewrite " + f.bundlePath(),
			Data: map[string]any{"bundle": f.bundlePath()}}, nil
	}
	return f.writeBundle(env, did)
}

// dropLeftovers removes what a finished rotation left behind, which an older
// kubexm's copy of the PKI on the masters (roles/identity) brought back into
// the work directory: NAME-next identical to NAME (it was promoted) and
// NAME-old identical to one of its backups (it was retired). Both
// generations at once would otherwise read as a rotation stopped halfway,
// which no stage can finish. A rotation under way never has such files:
// promote and retire rename, they do not copy.
func (f caFiles) dropLeftovers(check bool) ([]string, error) {
	same := func(a, b string) (bool, error) {
		x, err := os.ReadFile(a)
		if err != nil {
			return false, err
		}
		y, err := os.ReadFile(b)
		if err != nil {
			return false, err
		}
		return bytes.Equal(x, y), nil
	}
	// Only as a pair: one file without the other is left to the stages'
	// own halfway checks.
	leftover := func(gen string, twin func(ext string) (string, error)) (bool, error) {
		for _, ext := range []string{"crt", "key"} {
			p := f.path(gen, ext)
			if ok, err := exists(p); err != nil || !ok {
				return false, err
			}
			t, err := twin(ext)
			if err != nil || t == "" {
				return false, err
			}
			if eq, err := same(p, t); err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	}
	promoted := func(ext string) (string, error) {
		if ok, err := exists(f.path("", ext)); err != nil || !ok {
			return "", err
		}
		return f.path("", ext), nil
	}
	retired := func(ext string) (string, error) {
		p := f.path("old", ext)
		baks, err := filepath.Glob(p + ".*.bak")
		if err != nil {
			return "", err
		}
		for _, b := range baks {
			if eq, err := same(p, b); err != nil || eq {
				return b, err
			}
		}
		return "", nil
	}
	var did []string
	for _, l := range []struct {
		gen, why string
		twin     func(string) (string, error)
	}{{"next", "already promoted", promoted}, {"old", "already retired", retired}} {
		ok, err := leftover(l.gen, l.twin)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if !check {
			for _, ext := range []string{"crt", "key"} {
				if err := os.Remove(f.path(l.gen, ext)); err != nil {
					return nil, err
				}
			}
		}
		verb := "removed"
		if check {
			verb = "remove"
		}
		did = append(did, fmt.Sprintf("%s the leftover %s (%s)", verb, filepath.Base(f.path(l.gen, "crt")), l.why))
	}
	return did, nil
}

// promote renames file by file, so that a run interrupted between two
// renames is finished by the next one.
func (f caFiles) promote(check bool) ([]string, error) {
	var did []string
	for _, ext := range []string{"crt", "key"} {
		cur, next, old := f.path("", ext), f.path("next", ext), f.path("old", ext)
		hasNext, err := exists(next)
		if err != nil || !hasNext {
			if err != nil {
				return nil, err
			}
			continue
		}
		hasCur, err := exists(cur)
		if err != nil {
			return nil, err
		}
		if hasCur {
			if hasOld, err := exists(old); err != nil {
				return nil, err
			} else if hasOld {
				return nil, f.halfway(fmt.Sprintf("%s, %s and %s all exist", cur, next, old))
			}
		}
		if check {
			did = append(did, fmt.Sprintf("promote %s", next))
			continue
		}
		if hasCur {
			if err := os.Rename(cur, old); err != nil {
				return nil, err
			}
		}
		if err := os.Rename(next, cur); err != nil {
			return nil, err
		}
		did = append(did, fmt.Sprintf("promoted %s to %s", filepath.Base(next), filepath.Base(cur)))
	}
	if _, _, err := f.pair(""); err != nil && !check {
		return nil, err
	}
	return did, nil
}

func (f caFiles) add(check bool, args step.Args) ([]string, error) {
	cur, _, err := f.pair("")
	if err != nil {
		return nil, err
	}
	for _, gen := range []string{"next", "old"} {
		if _, ok, err := f.pair(gen); err != nil || ok {
			return nil, err // a rotation is under way: nothing to add
		}
	}
	req := Request{IsCA: true, CommonName: strings.TrimSpace(args.String("common_name"))}
	if req.CommonName == "" {
		req.CommonName = cur.Cert.Subject.CommonName
	}
	kt := KeyTypeOf(cur.Cert.PublicKey)
	if s := args.String("key_type"); s != "" {
		if kt, err = ParseKeyType(s); err != nil {
			return nil, err
		}
	}
	if kt == "" {
		return nil, fmt.Errorf("the key type of %s is not one kubexm makes; set key_type", f.path("", "crt"))
	}
	if req.Validity, err = ParseValidity(args["validity"]); err != nil {
		return nil, fmt.Errorf("validity: %w", err)
	}
	if req.Validity <= 0 {
		return nil, fmt.Errorf("validity must be positive, got %v", args["validity"])
	}
	if check {
		return []string{"create the CA " + f.path("next", "crt")}, nil
	}
	key, err := GenerateKey(kt)
	if err != nil {
		return nil, err
	}
	_, der, err := Issue(req, key, nil, time.Now())
	if err != nil {
		return nil, err
	}
	keyPEM, err := EncodeKey(key)
	if err != nil {
		return nil, err
	}
	// The key first: a certificate without its key would be a pair that
	// cannot sign.
	if err := writeAtomic(f.path("next", "key"), keyPEM, modeKey); err != nil {
		return nil, err
	}
	if err := writeAtomic(f.path("next", "crt"), EncodeCert(der), modeCert); err != nil {
		return nil, err
	}
	return []string{"created the CA " + filepath.Base(f.path("next", "crt"))}, nil
}

// retire moves whichever of NAME-old's two files is there, so that a run
// interrupted between the two renames is finished by the next one.
func (f caFiles) retire(check bool, now time.Time) ([]string, error) {
	// Never in the middle of a promote: the old CA may be all that signs.
	if _, _, err := f.pair(""); err != nil {
		return nil, err
	}
	for _, ext := range []string{"crt", "key"} {
		if ok, err := exists(f.path("next", ext)); err != nil {
			return nil, err
		} else if ok {
			return nil, f.halfway(f.path("next", ext) + " exists: the new CA was not promoted yet")
		}
	}
	var did []string
	for _, ext := range []string{"crt", "key"} {
		p := f.path("old", ext)
		if ok, err := exists(p); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		if check {
			did = append(did, "retire "+p)
			continue
		}
		bak := backupName(p, now)
		if err := os.Rename(p, bak); err != nil {
			return nil, err
		}
		did = append(did, "retired "+filepath.Base(p)+" as "+filepath.Base(bak))
	}
	return did, nil
}

// writeBundle writes the current CA, then the next or the old one.
func (f caFiles) writeBundle(env *step.Env, did []string) (step.Result, error) {
	var bundle bytes.Buffer
	rotation, n := "none", 0
	for _, gen := range []string{"", "next", "old"} {
		p, ok, err := f.pair(gen)
		if err != nil {
			return step.Result{}, err
		}
		if !ok {
			if gen == "" {
				return step.Result{}, f.halfway("there is no " + f.path("", "crt"))
			}
			continue
		}
		switch gen {
		case "next":
			rotation = "added"
		case "old":
			if rotation == "added" {
				return step.Result{}, f.halfway(fmt.Sprintf("both %s and %s exist", f.path("next", "crt"), f.path("old", "crt")))
			}
			rotation = "promoted"
		}
		bundle.Write(EncodeCert(p.Cert.Raw))
		n++
	}
	data := map[string]any{"bundle": f.bundlePath(), "cas": n, "rotation": rotation}
	old, err := readOptional(f.bundlePath())
	if err != nil {
		return step.Result{}, err
	}
	msg := strings.Join(did, ", ")
	if bytes.Equal(old, bundle.Bytes()) {
		if msg == "" {
			return step.Result{Msg: fmt.Sprintf("%s is up to date (%d CA, rotation %s)", f.bundlePath(), n, rotation), Data: data}, nil
		}
		return step.Result{Changed: true, Msg: msg, Data: data}, nil
	}
	if msg != "" {
		msg += "; "
	}
	if env.Check {
		return step.Result{Changed: true, Msg: msg + fmt.Sprintf("would write %s (%d CA)", f.bundlePath(), n), Data: data}, nil
	}
	if err := writeAtomic(f.bundlePath(), bundle.Bytes(), modeCert); err != nil {
		return step.Result{}, fmt.Errorf("write the trust bundle: %w", err)
	}
	logf(env, "ca_trust: wrote %s (%d CA, rotation %s)", f.bundlePath(), n, rotation)
	return step.Result{Changed: true, Msg: msg + fmt.Sprintf("wrote %s (%d CA, rotation %s)", f.bundlePath(), n, rotation), Data: data}, nil
}
