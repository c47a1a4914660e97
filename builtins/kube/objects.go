package kube

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/mensylisir/kubexm/internal/textdiff"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// decode reads the objects of a manifest: YAML documents or JSON, a kind
// ending in List giving its items. Empty documents are skipped; an object
// without apiVersion, kind or metadata.name is refused, naming its place.
func decode(text []byte, origin string) ([]*unstructured.Unstructured, error) {
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(text), 4096)
	var out []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", origin, doc, err)
		}
		if len(m) == 0 {
			continue
		}
		objs, err := fromMap(m, fmt.Sprintf("%s: document %d", origin, doc))
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
}

// fromMap checks one decoded object (or List) and returns its objects.
func fromMap(m map[string]any, where string) ([]*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: m}
	if u.GetAPIVersion() == "" || u.GetKind() == "" {
		return nil, fmt.Errorf("%s: an object needs apiVersion and kind", where)
	}
	if u.IsList() {
		var out []*unstructured.Unstructured
		err := u.EachListItem(func(o runtime.Object) error {
			item, ok := o.(*unstructured.Unstructured)
			if !ok {
				return fmt.Errorf("%s: a list item is not an object", where)
			}
			objs, err := fromMap(item.Object, where)
			out = append(out, objs...)
			return err
		})
		return out, err
	}
	if u.GetName() == "" {
		return nil, fmt.Errorf("%s: %s has no metadata.name", where, u.GetKind())
	}
	return []*unstructured.Unstructured{u}, nil
}

// describe names an object as kubectl prints it: kind/name, with its
// namespace when it has one.
func describe(u *unstructured.Unstructured) string {
	s := strings.ToLower(u.GetKind()) + "/" + u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		s = ns + "/" + s
	}
	return s
}

// volatile are the fields that change without anyone changing the object
// (the server's bookkeeping); comparing and diffing leave them out.
var volatile = [][]string{
	{"metadata", "managedFields"},
	{"metadata", "resourceVersion"},
	{"metadata", "generation"},
	{"metadata", "uid"},
	{"metadata", "creationTimestamp"},
	{"metadata", "selfLink"},
}

// comparable returns what of obj an apply or a patch decides: the object
// without the server's bookkeeping, and without its status unless status
// is what is written.
func comparable(obj *unstructured.Unstructured, withStatus bool) map[string]any {
	if obj == nil {
		return nil
	}
	c := obj.DeepCopy().Object
	for _, f := range volatile {
		unstructured.RemoveNestedField(c, f...)
	}
	if !withStatus {
		delete(c, "status")
	}
	return c
}

// same reports whether before and after are the same object as far as an
// apply or patch is concerned.
func same(before, after map[string]any) bool {
	return before != nil && reflect.DeepEqual(before, after)
}

// redacted is what the diff shows in place of a Secret's value.
const (
	redacted        = "(redacted)"
	redactedChanged = "(redacted, changed)"
	lastApplied     = "kubectl.kubernetes.io/last-applied-configuration"
)

// redact replaces the values of a Secret (data, stringData, and the
// last-applied annotation kubectl keeps of them) in before and after, both
// copies, so a diff shows which keys changed and never a value.
func redact(before, after map[string]any) {
	if kindOf(before) != "Secret" && kindOf(after) != "Secret" {
		return
	}
	for _, field := range []string{"data", "stringData"} {
		b, _ := before[field].(map[string]any)
		a, _ := after[field].(map[string]any)
		for k, v := range a {
			if old, ok := b[k]; ok && reflect.DeepEqual(old, v) {
				a[k] = redacted
			} else {
				a[k] = redactedChanged
			}
		}
		for k := range b {
			b[k] = redacted
		}
	}
	for _, m := range []map[string]any{before, after} {
		if _, ok, _ := unstructured.NestedString(m, "metadata", "annotations", lastApplied); ok {
			_ = unstructured.SetNestedField(m, redacted, "metadata", "annotations", lastApplied)
		}
	}
}

func kindOf(m map[string]any) string {
	k, _ := m["kind"].(string)
	return k
}

// diff is the unified diff of an object's comparable forms as YAML, the
// values of a Secret redacted.
func diff(name string, before, after map[string]any) string {
	redact(before, after)
	var b, a []byte
	if before != nil {
		b, _ = yaml.Marshal(before)
	}
	if after != nil {
		a, _ = yaml.Marshal(after)
	}
	return textdiff.Unified(name, b, a, before != nil)
}
