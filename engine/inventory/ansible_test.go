package inventory

import (
	"reflect"
	"strings"
	"testing"
)

func TestAnsibleInventories(t *testing.T) {
	yamlInv := `
all:
  vars: {env: prod, ansible_connection: local}
  hosts:
    web1: {port: 8080, ansible_host: 10.0.0.1}
  children:
    web:
      hosts:
        web1:
        web2: {ansible_connection: ssh, ansible_user: deploy, ansible_port: 2222, ansible_password: s3cret}
      vars: {tier: front}
    db:
      hosts:
        db1:
    app:
      children:
        web:
        db:
`
	iniInv := `
# comment
web1 port=8080 ansible_host=10.0.0.1

[web]
web1
web2 ansible_connection=ssh ansible_user=deploy ansible_port=2222 ansible_password="s3cret"

[web:vars]
tier=front

[db]
db1

[app:children]
web
db

[all:vars]
env=prod
ansible_connection=local
`
	if !IsAnsibleYAML([]byte(yamlInv)) || IsAnsibleYAML([]byte("apiVersion: v1\nkind: Cluster\nspec: {}\n")) || IsAnsibleYAML([]byte(iniInv)) {
		t.Fatal("IsAnsibleYAML")
	}
	y, err := ParseAnsibleYAML("hosts.yaml", []byte(yamlInv))
	if err != nil {
		t.Fatal(err)
	}
	i, err := ParseAnsibleINI("hosts.ini", []byte(iniInv))
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range []*Inventory{y, i} {
		var names []string
		for _, h := range inv.Hosts {
			names = append(names, h.Name)
		}
		if strings.Join(names, " ") != "web1 web2 db1" {
			t.Errorf("%s: hosts %v", inv.Source, names)
		}
		if got := inv.Groups["app"]; !reflect.DeepEqual(got, []string{"web1", "web2", "db1"}) {
			t.Errorf("%s: app = %v", inv.Source, got)
		}
		if inv.Vars["env"] != "prod" || inv.GroupVars["web"]["tier"] != "front" {
			t.Errorf("%s: vars %v %v", inv.Source, inv.Vars, inv.GroupVars)
		}
		w1, _ := inv.Host("web1")
		w2, _ := inv.Host("web2")
		if !w1.Local || w1.Address != "10.0.0.1" || w1.Vars["port"] != 8080 {
			t.Errorf("%s: web1 %+v", inv.Source, *w1)
		}
		if w2.Local || w2.User != "deploy" || w2.Port != 2222 || w2.Password != "s3cret" || w2.Address != "web2" {
			t.Errorf("%s: web2 %+v", inv.Source, *w2)
		}
		if _, ok := w2.Vars["ansible_password"]; ok {
			t.Errorf("%s: the password stayed a variable", inv.Source)
		}
	}
	for _, bad := range []string{"[web\nh1\n", "[web:nonsense]\nh1\n", "h1 novalue\n", "web[01:03]\n", "h1 ansible_connection=winrm\n", "h1 ansible_port=x\n", ""} {
		if _, err := ParseAnsibleINI("bad.ini", []byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := ParseAnsibleYAML("bad.yaml", []byte("all:\n  hostz: {}\n")); err == nil || !strings.Contains(err.Error(), "unknown key") {
		t.Errorf("unknown key: %v", err)
	}
}

func TestUngroupedHoldsOnlyHostsOfNoGroup(t *testing.T) {
	inv, err := ParseAnsibleINI("h.ini", []byte("a\nb\n[g]\na\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := inv.Groups["ungrouped"]; !reflect.DeepEqual(got, []string{"b"}) {
		t.Errorf("ungrouped = %v", got)
	}
}
