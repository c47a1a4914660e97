package eval

import "sync"

// cache maps source text to its compiled form. It is bounded because
// templates can be whole files and the engine renders many distinct
// strings; when full, an arbitrary entry is dropped (Go's map order is
// random), which is cheap and good enough for a working set that is
// normally far below the bound.
type cache[V any] struct {
	mu    sync.RWMutex
	max   int
	items map[string]V
}

func newCache[V any](max int) *cache[V] {
	return &cache[V]{max: max, items: make(map[string]V)}
}

func (c *cache[V]) get(key string) (V, bool) {
	c.mu.RLock()
	v, ok := c.items[key]
	c.mu.RUnlock()
	return v, ok
}

func (c *cache[V]) put(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; !ok && len(c.items) >= c.max {
		for k := range c.items {
			delete(c.items, k)
			break
		}
	}
	c.items[key] = v
}
