package variables

import (
	"reflect"
	"sync"

	"github.com/mensylisir/kubexm/engine/playbook"
)

// Memo reuses a templated variable's rendering for a host while the values
// of the names it reads are the very ones it was rendered from. A run builds
// every task's variables afresh, and most templated defaults read nothing a
// task changes; rendering them again was most of a re-run's CPU time.
//
// Values are never modified once made (the engine replaces maps instead), so
// "the very ones" is identity for maps and lists and equality for scalars: a
// new value under a name, even an equal one, renders again. Only closed
// templates (eval's Closed: no whole-map access, no clock or randomness) are
// reused.
type Memo struct {
	isClosed func(string) bool
	closed   sync.Map // *playbook.VarDef -> bool
	last     sync.Map // memoKey -> *memoEntry
}

type memoKey struct {
	d    *playbook.VarDef
	host string
}

type memoEntry struct {
	read []any // the values of d.Refs when it was rendered; absent for a missing name
	val  any
}

type absent struct{}

// NewMemo returns a Memo that asks isClosed whether a template string may be
// reused.
func NewMemo(isClosed func(string) bool) *Memo {
	return &Memo{isClosed: isClosed}
}

// Render returns d's value for host from the variables v, which hold every
// name d reads, already rendered: the last rendering when those names hold
// the same values, otherwise render's result. Errors are not remembered.
func (m *Memo) Render(host string, d *playbook.VarDef, v map[string]any, render func() (any, error)) (any, error) {
	if m == nil || !m.closedDef(d) {
		return render()
	}
	key := memoKey{d, host}
	if e, ok := m.last.Load(key); ok {
		if e := e.(*memoEntry); e.matches(d.Refs, v) {
			return e.val, nil
		}
	}
	val, err := render()
	if err != nil {
		return nil, err
	}
	read := make([]any, len(d.Refs))
	for i, name := range d.Refs {
		if x, ok := v[name]; ok {
			read[i] = x
		} else {
			read[i] = absent{}
		}
	}
	m.last.Store(key, &memoEntry{read: read, val: val})
	return val, nil
}

func (m *Memo) closedDef(d *playbook.VarDef) bool {
	if c, ok := m.closed.Load(d); ok {
		return c.(bool)
	}
	c := m.closedValue(d.Val)
	m.closed.Store(d, c)
	return c
}

func (m *Memo) closedValue(v any) bool {
	switch x := v.(type) {
	case string:
		return m.isClosed(x)
	case []any:
		for _, e := range x {
			if !m.closedValue(e) {
				return false
			}
		}
	case map[string]any:
		for _, e := range x {
			if !m.closedValue(e) {
				return false
			}
		}
	}
	return true
}

func (e *memoEntry) matches(refs []string, v map[string]any) bool {
	for i, name := range refs {
		x, ok := v[name]
		if !ok {
			x = absent{}
		}
		if !sameValue(e.read[i], x) {
			return false
		}
	}
	return true
}

// sameValue reports whether a and b are the same value: equal scalars, the
// same map, the same list.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool, int, int64, uint64, float64, absent, nil:
		return a == b
	}
	ra, rb := reflect.ValueOf(a), reflect.ValueOf(b)
	if ra.Type() != rb.Type() {
		return false
	}
	switch ra.Kind() {
	case reflect.Map:
		return ra.UnsafePointer() == rb.UnsafePointer()
	case reflect.Slice:
		return ra.Len() == rb.Len() && (ra.Len() == 0 || ra.UnsafePointer() == rb.UnsafePointer())
	}
	return ra.Comparable() && rb.Comparable() && ra.Equal(rb)
}
