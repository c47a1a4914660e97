package pack

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mensylisir/kubexm/builtins/controlfs"
	"github.com/mensylisir/kubexm/engine/step"
)

// The encrypted form of a pack archive, the STREAM construction over
// AES-256-GCM so that a multi-gigabyte etcd snapshot never sits in memory:
//
//	magic "KXMENC01" | salt (16) | PBKDF2 iterations (uint32) | nonce prefix (7)
//	then chunks: ciphertext length (uint32) | ciphertext of up to 1 MiB + tag
//
// Chunk i's nonce is prefix | i (uint32) | 1 for the last chunk else 0, and
// the header is every chunk's additional data, so reordered, dropped,
// truncated or appended chunks and a changed header all fail to open.

const (
	encMagic      = "KXMENC01"
	encChunk      = 1 << 20
	encIterations = 600000
	encHeaderLen  = len(encMagic) + 16 + 4 + 7
)

// loadKey reads the key material from a file or an environment variable of
// kubexm's process, or returns nil when neither is asked for. Errors name
// the source, never the material.
func loadKey(file, envName string, env *step.Env) ([]byte, error) {
	switch {
	case file != "" && envName != "":
		return nil, errors.New("give key_file or key_env, not both")
	case file != "":
		b, err := os.ReadFile(controlfs.WorkPath(env, file))
		if err != nil {
			return nil, fmt.Errorf("key file: %w", err)
		}
		b = bytes.TrimRight(b, "\r\n")
		if len(b) == 0 {
			return nil, fmt.Errorf("key file %s is empty", file)
		}
		return b, nil
	case envName != "":
		v, ok := os.LookupEnv(envName)
		v = strings.TrimRight(v, "\r\n")
		if !ok || v == "" {
			return nil, fmt.Errorf("key_env: the environment variable %s is not set or empty", envName)
		}
		return []byte(v), nil
	}
	return nil, nil
}

func deriveKey(material, salt []byte, iter int) (cipher.AEAD, error) {
	k, err := pbkdf2.Key(sha256.New, string(material), salt, iter, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

type encryptWriter struct {
	w      io.Writer
	aead   cipher.AEAD
	header []byte
	prefix []byte
	buf    []byte
	n      uint32
}

func newEncryptWriter(w io.Writer, material []byte) (io.WriteCloser, error) {
	header := make([]byte, encHeaderLen)
	copy(header, encMagic)
	salt := header[len(encMagic) : len(encMagic)+16]
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(header[len(encMagic)+16:], encIterations)
	prefix := header[len(encMagic)+20:]
	if _, err := rand.Read(prefix); err != nil {
		return nil, err
	}
	aead, err := deriveKey(material, salt, encIterations)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(header); err != nil {
		return nil, err
	}
	return &encryptWriter{w: w, aead: aead, header: header, prefix: prefix, buf: make([]byte, 0, encChunk)}, nil
}

func chunkNonce(prefix []byte, i uint32, last bool) []byte {
	n := make([]byte, 12)
	copy(n, prefix)
	binary.BigEndian.PutUint32(n[7:], i)
	if last {
		n[11] = 1
	}
	return n
}

func (e *encryptWriter) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		// A full buffer is sealed only when more data follows, so the last
		// chunk is always the one Close seals.
		if len(e.buf) == encChunk {
			if err := e.seal(false); err != nil {
				return 0, err
			}
		}
		k := min(encChunk-len(e.buf), len(p))
		e.buf = append(e.buf, p[:k]...)
		p = p[k:]
	}
	return total, nil
}

func (e *encryptWriter) seal(last bool) error {
	ct := e.aead.Seal(nil, chunkNonce(e.prefix, e.n, last), e.buf, e.header)
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(ct)))
	if _, err := e.w.Write(l[:]); err != nil {
		return err
	}
	if _, err := e.w.Write(ct); err != nil {
		return err
	}
	e.n++
	e.buf = e.buf[:0]
	return nil
}

func (e *encryptWriter) Close() error { return e.seal(true) }

// isEncrypted peeks at the magic and rewinds.
func isEncrypted(f io.ReadSeeker) (bool, error) {
	b := make([]byte, len(encMagic))
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	return n == len(encMagic) && string(b) == encMagic, nil
}

type decryptReader struct {
	r      io.Reader
	aead   cipher.AEAD
	header []byte
	prefix []byte
	n      uint32
	plain  []byte
	done   bool
}

func newDecryptReader(r io.Reader, material []byte) (io.Reader, error) {
	header := make([]byte, encHeaderLen)
	if _, err := io.ReadFull(r, header); err != nil {
		return nil, fmt.Errorf("encrypted header: %w", err)
	}
	iter := int(binary.BigEndian.Uint32(header[len(encMagic)+16:]))
	if iter < 1 || iter > 10*encIterations {
		return nil, errors.New("encrypted header: implausible iteration count")
	}
	aead, err := deriveKey(material, header[len(encMagic):len(encMagic)+16], iter)
	if err != nil {
		return nil, err
	}
	return &decryptReader{r: r, aead: aead, header: header, prefix: header[len(encMagic)+20:]}, nil
}

func (d *decryptReader) Read(p []byte) (int, error) {
	for len(d.plain) == 0 {
		if d.done {
			return 0, io.EOF
		}
		var l [4]byte
		if _, err := io.ReadFull(d.r, l[:]); err != nil {
			return 0, errors.New("the encrypted archive is truncated")
		}
		size := binary.BigEndian.Uint32(l[:])
		if size < uint32(d.aead.Overhead()) || size > encChunk+uint32(d.aead.Overhead()) {
			return 0, errors.New("the encrypted archive is damaged")
		}
		ct := make([]byte, size)
		if _, err := io.ReadFull(d.r, ct); err != nil {
			return 0, errors.New("the encrypted archive is truncated")
		}
		// The last chunk is the one that opens with the last flag; a chunk
		// that opens as last must be followed by nothing.
		pt, err := d.aead.Open(nil, chunkNonce(d.prefix, d.n, false), ct, d.header)
		if err != nil {
			pt, err = d.aead.Open(nil, chunkNonce(d.prefix, d.n, true), ct, d.header)
			if err != nil {
				return 0, errors.New("cannot decrypt: wrong key, or the archive was changed")
			}
			var extra [1]byte
			if n, _ := d.r.Read(extra[:]); n > 0 {
				return 0, errors.New("the encrypted archive has data after its last chunk")
			}
			d.done = true
		}
		d.n++
		d.plain = pt
	}
	n := copy(p, d.plain)
	d.plain = d.plain[n:]
	return n, nil
}
