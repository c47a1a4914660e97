package eval

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
)

// Many goroutines share one Evaluator, as the engine's forks do: every host
// must get its own answer from the shared cached templates and programs.
func TestConcurrentUse(t *testing.T) {
	e := New()
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				host := fmt.Sprintf("node%d", (w+i)%5)
				vars := testVars()
				vars["inventory_hostname"] = host
				vars["item"] = i
				vars["groups"] = map[string]any{"etcd": []any{host, "x"}}
				if err := checkOne(e, vars, host, i); err != nil {
					errs <- fmt.Errorf("worker %d round %d: %w", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := countCaptures(e); n != 0 {
		t.Fatalf("%d captured values left behind", n)
	}
}

func checkOne(e *Evaluator, vars map[string]any, host string, i int) error {
	got, err := e.Render("{{ .groups.etcd }}", vars)
	if err != nil {
		return err
	}
	if want := []any{host, "x"}; !reflect.DeepEqual(got, want) {
		return fmt.Errorf("typed render = %v, want %v", got, want)
	}
	s, err := e.RenderString("{{ .inventory_hostname }}-{{ .item }}", vars)
	if err != nil {
		return err
	}
	if want := fmt.Sprintf("%s-%d", host, i); s != want {
		return fmt.Errorf("render = %q, want %q", s, want)
	}
	n, err := e.Render("{{ .item }}", vars)
	if err != nil {
		return err
	}
	if n != i {
		return fmt.Errorf("typed item = %v, want %d", n, i)
	}
	ok, err := e.EvalBool(`inventory_hostname == groups.etcd[0] and item % 3 == `+fmt.Sprint(i%3), vars)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("EvalBool = false")
	}
	v, err := e.Eval(`item * 2`, vars)
	if err != nil {
		return err
	}
	if v != i*2 {
		return fmt.Errorf("Eval = %v, want %d", v, i*2)
	}
	if _, err := e.Eval(`nope`, vars); err == nil {
		return fmt.Errorf("undefined variable gave no error")
	}
	return nil
}
