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
		if inv.Vars["env"] != "prod" || len(inv.GroupVars) != 0 {
			t.Errorf("%s: vars %v %v", inv.Source, inv.Vars, inv.GroupVars)
		}
		w1, _ := inv.Host("web1")
		w2, _ := inv.Host("web2")
		if !w1.Local || w1.Address != "10.0.0.1" || w1.Vars["port"] != 8080 || w1.Vars["tier"] != "front" {
			t.Errorf("%s: web1 %+v", inv.Source, *w1)
		}
		if w2.Local || w2.User != "deploy" || w2.Port != 2222 || w2.Password != "s3cret" || w2.Address != "web2" {
			t.Errorf("%s: web2 %+v", inv.Source, *w2)
		}
		if !strings.Contains(w2.CredentialsHint, "ansible_ssh_private_key_file") {
			t.Errorf("%s: web2's credentials hint %q names no inventory variable", inv.Source, w2.CredentialsHint)
		}
		if _, ok := w2.Vars["ansible_password"]; ok {
			t.Errorf("%s: the password stayed a variable", inv.Source)
		}
	}
	for _, bad := range []string{"[web\nh1\n", "[web:nonsense]\nh1\n", "h1 novalue\n", "web[3:1]\n", "web[a:3]\n", "web[1:2\n", "h1 ansible_connection=winrm\n", "h1 ansible_port=x\n", ""} {
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

// TestGroupVarsByDepth: a child group's variables override its parent's,
// whatever their names, and the host's own override both.
func TestGroupVarsByDepth(t *testing.T) {
	inv, err := ParseAnsibleINI("h.ini", []byte("[achild]\nh1\nh2 x=host\n[achild:vars]\nx=child\n[zparent:children]\nachild\n[zparent:vars]\nx=parent\ny=parent\n"))
	if err != nil {
		t.Fatal(err)
	}
	h1, _ := inv.Host("h1")
	h2, _ := inv.Host("h2")
	if h1.Vars["x"] != "child" || h1.Vars["y"] != "parent" || h2.Vars["x"] != "host" {
		t.Errorf("h1 %v, h2 %v", h1.Vars, h2.Vars)
	}
}

func TestHostRanges(t *testing.T) {
	for in, want := range map[string]string{
		"web[01:03]":       "web01 web02 web03",
		"db-[a:c]":         "db-a db-b db-c",
		"n[1:9:4]":         "n1 n5 n9",
		"r[1:2]-[a:b].lan": "r1-a.lan r1-b.lan r2-a.lan r2-b.lan",
		"plain":            "plain",
	} {
		got, err := expandRange(in)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("%s: %v %v, want %s", in, got, err, want)
		}
	}
	inv, err := ParseAnsibleINI("h.ini", []byte("[web]\nweb[1:2] ansible_connection=local\n"))
	if err != nil || len(inv.Hosts) != 2 || !inv.Hosts[1].Local || inv.Hosts[1].Name != "web2" {
		t.Errorf("%+v %v", inv, err)
	}
}

// Ansible reads [group:vars] values as strings and host line values as
// literals (issue 46: http_port=80 became 80 and `http_port == "80"` was false).
func TestINIGroupVarsAreStrings(t *testing.T) {
	inv, err := ParseAnsibleINI("h.ini", []byte("[web]\nweb1 http_port=8080 flag=true\nweb2\n[web:vars]\nhttp_port=80\nenabled=true\nname=\"a b\"\nansible_port=2222\n"))
	if err != nil {
		t.Fatal(err)
	}
	web2, _ := inv.Host("web2")
	group := web2.Vars
	if group["http_port"] != "80" || group["enabled"] != "true" || group["name"] != `"a b"` {
		t.Errorf("[web:vars] = %#v, want the strings as written", group)
	}
	h, _ := inv.Host("web1")
	if h.Vars["http_port"] != 8080 || h.Vars["flag"] != true || h.Port != 2222 {
		t.Errorf("web1 vars %#v port %d, want a typed host line and the group's port", h.Vars, h.Port)
	}
}
