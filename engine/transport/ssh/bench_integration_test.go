//go:build integration

package ssh

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/transport"
)

// Run with a fixed count, e.g.
//
//	go test -tags integration -run '^$' -bench Commands -benchtime 400x ./engine/transport/ssh/
//	go test -tags integration -run '^$' -bench Upload -benchtime 3x ./engine/transport/ssh/
// Every sub-benchmark runs `true` with the same concurrency; the kubexm and
// OpenSSH (ControlMaster) numbers come from the same run on the same sshd.

const benchWorkers = 10

// parallel runs n jobs on workers goroutines and returns commands per second.
func parallel(b *testing.B, n, workers int, job func(i int) error) {
	b.Helper()
	jobs := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := job(i); err != nil {
					once.Do(func() { firstErr = err })
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "cmds/s")
}

func kubexmTrue(tr *Transport) error {
	res, err := tr.Run(context.Background(), transport.Command{Argv: []string{"true"}})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	return err
}

// openssh is the OpenSSH client multiplexing over ControlMaster sockets.
type openssh struct {
	dir string
}

func (o openssh) opts(host int) []string {
	return []string{"-i", server.key,
		"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		"-o", "ControlMaster=auto", "-o", "ControlPath=" + filepath.Join(o.dir, fmt.Sprintf("cm-%d", host)), "-o", "ControlPersist=60"}
}

func (o openssh) args(host int, extra ...string) []string {
	return append(append(o.opts(host), "-p", fmt.Sprint(server.port), testUser+"@127.0.0.1"), extra...)
}

func (o openssh) run(host int) error {
	out, err := exec.Command("ssh", o.args(host, "true")...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ssh: %v: %s", err, out)
	}
	return nil
}

func (o openssh) stop(hosts int) {
	for h := 0; h < hosts; h++ {
		exec.Command("ssh", append([]string{"-O", "exit"}, o.args(h)...)...).Run()
	}
}

func BenchmarkCommands(b *testing.B) {
	for _, hosts := range []int{1, 20} {
		b.Run(fmt.Sprintf("kubexm/hosts=%d", hosts), func(b *testing.B) {
			trs := make([]*Transport, hosts)
			for i := range trs {
				trs[i] = dialT(b, server.keyHost(fmt.Sprintf("h%d", i)), server.opts(b))
				if err := kubexmTrue(trs[i]); err != nil {
					b.Fatal(err)
				}
			}
			parallel(b, b.N, benchWorkers*min(hosts, 2), func(i int) error { return kubexmTrue(trs[i%hosts]) })
		})
		b.Run(fmt.Sprintf("openssh-controlmaster/hosts=%d", hosts), func(b *testing.B) {
			o := openssh{dir: b.TempDir()}
			defer o.stop(hosts)
			for h := 0; h < hosts; h++ {
				if err := o.run(h); err != nil {
					b.Fatal(err)
				}
			}
			parallel(b, b.N, benchWorkers*min(hosts, 2), func(i int) error { return o.run(i % hosts) })
		})
	}
}

func BenchmarkUpload(b *testing.B) {
	const size = 64 << 20
	src := filepath.Join(b.TempDir(), "src")
	f, err := os.Create(src)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		b.Fatal(err)
	}
	f.Close()
	dir := userDir(b)
	b.Run("kubexm-put", func(b *testing.B) {
		tr := dialT(b, server.keyHost("up"), server.opts(b))
		b.SetBytes(size)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			in, _ := os.Open(src)
			err := tr.Put(context.Background(), in, filepath.Join(dir, "k"), transport.PutOptions{})
			in.Close()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("openssh-sftp", func(b *testing.B) {
		o := openssh{dir: b.TempDir()}
		defer o.stop(1)
		if err := o.run(0); err != nil {
			b.Fatal(err)
		}
		batch := filepath.Join(o.dir, "batch")
		os.WriteFile(batch, []byte(fmt.Sprintf("put %s %s\n", src, filepath.Join(dir, "o"))), 0o644)
		args := append(o.opts(0), "-b", batch, "-P", fmt.Sprint(server.port), testUser+"@127.0.0.1")
		b.SetBytes(size)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if out, err := exec.Command("sftp", args...).CombinedOutput(); err != nil {
				b.Fatalf("sftp: %v: %s", err, out)
			}
		}
	})
}
