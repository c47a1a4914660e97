package files

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

// slowHost is a transport that counts round trips (commands and stats; a
// file transfer counts as one) and waits rtt on each, as a remote host
// would.
type slowHost struct {
	transport.Transport
	rtt   time.Duration
	trips atomic.Int64
}

func (s *slowHost) trip() {
	s.trips.Add(1)
	if s.rtt > 0 {
		time.Sleep(s.rtt)
	}
}

func (s *slowHost) Run(ctx context.Context, c transport.Command) (transport.Result, error) {
	s.trip()
	return s.Transport.Run(ctx, c)
}

func (s *slowHost) Stat(ctx context.Context, p string, become bool) (transport.FileInfo, error) {
	s.trip()
	return s.Transport.Stat(ctx, p, become)
}

func (s *slowHost) Sha256(ctx context.Context, p string, become bool) (string, error) {
	s.trip()
	return s.Transport.Sha256(ctx, p, become)
}

func (s *slowHost) Put(ctx context.Context, r io.Reader, dst string, o transport.PutOptions) error {
	s.trip()
	return s.Transport.Put(ctx, r, dst, o)
}

func (s *slowHost) PutFile(ctx context.Context, src, dst string, o transport.PutOptions) (bool, error) {
	s.trip()
	return s.Transport.PutFile(ctx, src, dst, o)
}

func batchOf(env *step.Env, args []step.Args) []step.BatchItem {
	items := make([]step.BatchItem, len(args))
	for i, a := range args {
		items[i] = step.BatchItem{Env: env, Args: File{}.Spec().WithDefaults(a)}
	}
	return items
}

// TestFileBatchLikeOneByOne: a batch does what running the items one after
// the other does, including items whose paths an earlier item changes
// (removed, created under, reached through a symbolic link the batch
// re-points), and a re-run of the batch is one round trip that changes
// nothing.
func TestFileBatchLikeOneByOne(t *testing.T) {
	env, root := steptest.Env(t)
	host := &slowHost{Transport: env.Target}
	env.Target = host
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	steptest.MustWrite(t, filepath.Join(a, "old"), "x")
	if err := os.MkdirAll(b, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "cur")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	args := []step.Args{
		{"path": filepath.Join(root, "d1"), "state": "directory", "mode": "0750"},
		{"path": a, "state": "absent"},                                            // removes a/old
		{"path": filepath.Join(a, "old"), "state": "absent"},                      // gone already: ok, not changed
		{"path": filepath.Join(a, "new", "x"), "state": "directory"},              // a is created again
		{"path": link, "state": "link", "src": b},                                 // cur -> b
		{"path": filepath.Join(link, "sub"), "state": "directory"},                // made in b, not a
		{"path": filepath.Join(root, "d1"), "state": "directory", "mode": "0700"}, // mode of item 0 changed again
		{"path": "/", "state": "absent"},                                          // refused, others go on
	}
	results, errs := File{}.RunBatch(t.Context(), batchOf(env, args))
	wantChanged := []bool{true, true, false, true, true, true, true, false}
	for i := range args {
		if i == len(args)-1 {
			if errs[i] == nil {
				t.Errorf("item %d (%v): want an error", i, args[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("item %d (%v): %v", i, args[i], errs[i])
		}
		if results[i].Changed != wantChanged[i] {
			t.Errorf("item %d (%v): changed %v, want %v (%s)", i, args[i], results[i].Changed, wantChanged[i], results[i].Msg)
		}
	}
	if _, err := os.Stat(filepath.Join(b, "sub")); err != nil {
		t.Errorf("sub not made through the re-pointed link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(a, "sub")); err == nil {
		t.Errorf("sub made through the old link target")
	}
	if fi, err := os.Stat(filepath.Join(root, "d1")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("d1: %v %v", fi, err)
	}

	// Again what holds now: nothing changes, one round trip for all items.
	args = []step.Args{args[6], args[2], args[3], args[4], args[5]}
	host.trips.Store(0)
	results, errs = File{}.RunBatch(t.Context(), batchOf(env, args))
	for i := range args {
		if errs[i] != nil || results[i].Changed {
			t.Errorf("re-run item %d (%v): changed %v, err %v (%s)", i, args[i], results[i].Changed, errs[i], results[i].Msg)
		}
	}
	if n := host.trips.Load(); n != 1 {
		t.Errorf("re-run took %d round trips, want 1", n)
	}
	// Check mode reads once as well and reports what Run would.
	env.Check = true
	host.trips.Store(0)
	more := append(args, step.Args{"path": filepath.Join(root, "d2"), "state": "directory"})
	results, errs = File{}.RunBatch(t.Context(), batchOf(env, more))
	if errs[len(more)-1] != nil || !results[len(more)-1].Changed || host.trips.Load() != 1 {
		t.Errorf("check mode: %v %v, %d round trips", results[len(more)-1], errs[len(more)-1], host.trips.Load())
	}
	if _, err := os.Stat(filepath.Join(root, "d2")); err == nil {
		t.Error("check mode made d2")
	}
}

// TestStatManyNames: a path whose owner has no name reads as the id, the
// way the SFTP transport reports it; a missing path and a symbolic link
// read like Stat reads them.
func TestStatManyLikeStat(t *testing.T) {
	env, root := steptest.Env(t)
	f := filepath.Join(root, "f")
	steptest.MustWrite(t, f, "x")
	l := filepath.Join(root, "l")
	if err := os.Symlink(f, l); err != nil {
		t.Fatal(err)
	}
	paths := []string{f, l, root, filepath.Join(root, "missing"), filepath.Join(l, "..", "f"), f}
	real, _ := filepath.EvalSymlinks(root)
	for _, many := range []func(context.Context, transport.Transport, []string, bool) ([]transport.StatEntry, error){
		transport.StatManyCommand, transport.StatMany} {
		got, err := many(t.Context(), env.Target, paths, false)
		if err != nil {
			t.Fatal(err)
		}
		compareStats(t, env, paths, got)
		if got[1].Real != filepath.Join(real, "l") {
			t.Errorf("real path of the link itself: %q", got[1].Real)
		}
	}
	if _, err := transport.StatManyCommand(t.Context(), env.Target, []string{filepath.Join(f, "under-a-file")}, false); err == nil {
		t.Error("a path under a file: want an error, as Stat gives")
	}
}

func compareStats(t *testing.T, env *step.Env, paths []string, got []transport.StatEntry) {
	t.Helper()
	for i, p := range paths {
		want, err := env.Target.Stat(t.Context(), p, false)
		if err != nil {
			t.Fatal(err)
		}
		g := got[i].Info
		if g.Exists != want.Exists || g.IsDir != want.IsDir || g.IsLink != want.IsLink || g.LinkTarget != want.LinkTarget ||
			g.Mode != want.Mode || g.Size != want.Size || g.Owner != want.Owner || g.Group != want.Group || !g.ModTime.Equal(want.ModTime) {
			t.Errorf("%s: StatMany %+v, Stat %+v", p, g, want)
		}
	}
}

// BenchmarkFileLoop compares a 10-item `file` loop on a host 2 ms away run
// item by item (Run, as the engine does without batching) with the same
// loop in one RunBatch, on a re-run where nothing changes and on a fresh
// host where every directory is made.
func BenchmarkFileLoop(b *testing.B) {
	const items, rtt = 10, 2 * time.Millisecond
	for _, fresh := range []bool{false, true} {
		for _, batched := range []bool{false, true} {
			b.Run(fmt.Sprintf("fresh=%v/batched=%v", fresh, batched), func(b *testing.B) {
				env, root := steptest.Env(b)
				env.Target = &slowHost{Transport: env.Target, rtt: rtt}
				args := make([]step.Args, items)
				for i := range args {
					args[i] = step.Args{"path": filepath.Join(root, fmt.Sprintf("d%d", i)), "state": "directory", "mode": "0755"}
				}
				benchFileLoop(b, env, args, batched, func() {
					if !fresh {
						return
					}
					for _, a := range args {
						if err := os.Remove(a.String("path")); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		}
	}
}

// benchFileLoop runs the file items args on env (whose Target is a
// slowHost) once, then b.N times, one by one or in a batch, with reset
// (untimed) before each, and reports the round trips.
func benchFileLoop(b *testing.B, env *step.Env, args []step.Args, batched bool, reset func()) {
	host := env.Target.(*slowHost)
	run := func() {
		if batched {
			_, errs := File{}.RunBatch(b.Context(), batchOf(env, args))
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			return
		}
		for _, a := range args {
			if _, err := (File{}).Run(b.Context(), env, File{}.Spec().WithDefaults(a)); err != nil {
				b.Fatal(err)
			}
		}
	}
	run()
	host.trips.Store(0)
	for b.Loop() {
		b.StopTimer()
		reset()
		b.StartTimer()
		run()
	}
	b.ReportMetric(float64(host.trips.Load())/float64(b.N), "trips/op")
}

// StatMany passes the transport's own way of reading many paths on, as one
// round trip.
func (s *slowHost) StatMany(ctx context.Context, paths []string, become bool) ([]transport.StatEntry, error) {
	if m, ok := s.Transport.(transport.ManyStater); ok {
		s.trip()
		return m.StatMany(ctx, paths, become)
	}
	return transport.StatManyCommand(ctx, s, paths, become)
}

// TestFileBatchMakesDirectoriesAtOnce: ten missing directories are made in
// one command and read back in one (with the batch's first read, three
// round trips, not twenty-one), each reported created with its mode, while
// an item under another item's path still acts by itself after it.
func TestFileBatchMakesDirectoriesAtOnce(t *testing.T) {
	env, root := steptest.Env(t)
	host := &slowHost{Transport: env.Target}
	env.Target = host
	var args []step.Args
	for i := range 10 {
		args = append(args, step.Args{"path": filepath.Join(root, fmt.Sprintf("d%d", i)), "state": "directory", "mode": "0750"})
	}
	results, errs := File{}.RunBatch(t.Context(), batchOf(env, args))
	for i := range args {
		if errs[i] != nil || !results[i].Changed {
			t.Fatalf("item %d: changed %v, err %v (%s)", i, results[i].Changed, errs[i], results[i].Msg)
		}
		if fi, err := os.Stat(args[i].String("path")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
			t.Errorf("item %d: %v %v", i, fi, err)
		}
	}
	if n := host.trips.Load(); n != 3 {
		t.Errorf("ten new directories took %d round trips, want 3", n)
	}
	host.trips.Store(0)
	results, errs = File{}.RunBatch(t.Context(), batchOf(env, args))
	for i := range args {
		if errs[i] != nil || results[i].Changed {
			t.Errorf("re-run item %d: changed %v, err %v", i, results[i].Changed, errs[i])
		}
	}
	if n := host.trips.Load(); n != 1 {
		t.Errorf("re-run took %d round trips, want 1", n)
	}

	// e and e/f overlap: neither is batched, both act in order (e/f makes
	// e, whose mode e's item then sets), and the two others are batched.
	args = []step.Args{
		{"path": filepath.Join(root, "e", "f"), "state": "directory", "mode": "0700"},
		{"path": filepath.Join(root, "g"), "state": "directory"},
		{"path": filepath.Join(root, "e"), "state": "directory", "mode": "0711"},
		{"path": filepath.Join(root, "h"), "state": "directory"},
	}
	results, errs = File{}.RunBatch(t.Context(), batchOf(env, args))
	for i, want := range []bool{true, true, true, true} {
		if errs[i] != nil || results[i].Changed != want {
			t.Errorf("item %d (%v): changed %v, want %v, err %v (%s)", i, args[i], results[i].Changed, want, errs[i], results[i].Msg)
		}
	}
	for p, mode := range map[string]os.FileMode{"e/f": 0o700, "e": 0o711, "g": 0o755, "h": 0o755} {
		if fi, err := os.Stat(filepath.Join(root, p)); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want mode %o", p, fi, err, mode)
		}
	}
}
