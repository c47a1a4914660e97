package transport

import "io"

// DefaultOutputCap bounds how much of each output stream a transport keeps in
// memory for a Result; the rest still reaches Command.Stdout/Stderr.
const DefaultOutputCap = 16 << 20

// CappedBuffer keeps the first Cap bytes written to it and counts the rest,
// so a chatty command cannot exhaust memory.
type CappedBuffer struct {
	Cap       int
	buf       []byte
	truncated bool
}

func (b *CappedBuffer) Write(p []byte) (int, error) {
	room := b.Cap - len(b.buf)
	if room < len(p) {
		b.truncated = true
		if room > 0 {
			b.buf = append(b.buf, p[:room]...)
		}
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// Bytes returns what was kept.
func (b *CappedBuffer) Bytes() []byte { return b.buf }

// Truncated reports whether anything was dropped.
func (b *CappedBuffer) Truncated() bool { return b.truncated }

// Tee returns a writer that writes to both the capture and an optional stream.
func Tee(capture *CappedBuffer, stream io.Writer) io.Writer {
	if stream == nil {
		return capture
	}
	return io.MultiWriter(capture, stream)
}
