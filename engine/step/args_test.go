package step

import (
	"reflect"
	"testing"
)

func TestWithDefaults(t *testing.T) {
	s := Spec{Args: []Arg{
		{Name: "file", Type: String, Default: "/etc/x.conf"},
		{Name: "reload", Type: Bool, Default: true},
		{Name: "codes", Type: List, Default: []any{200}},
		{Name: "port", Type: Int, Default: 53},
		{Name: "name", Type: String},
	}}
	given := Args{"file": "", "reload": false, "codes": []any{}, "port": 0, "extra": "kept"}
	got := s.WithDefaults(given)
	want := Args{"file": "/etc/x.conf", "reload": false, "codes": []any{200}, "port": 0, "extra": "kept"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v (empty string and list take the default; false and 0 are values)", got, want)
	}
	if given["file"] != "" {
		t.Error("WithDefaults changed its argument")
	}
	if got := s.WithDefaults(nil); got.String("file") != "/etc/x.conf" || !got.Bool("reload") || got.Int("port") != 53 || got.Has("name") {
		t.Errorf("from nothing: %v", got)
	}
	if got := s.WithDefaults(Args{"file": "/etc/y.conf", "codes": []any{204}}); got.String("file") != "/etc/y.conf" || got.Strings("codes")[0] != "204" {
		t.Errorf("given values: %v", got)
	}
}
