// Command haproxy-golden renders haproxy configuration templates with Go's text/template, the way
// CAPD renders customHAProxyConfigTemplateRef (same data types, same JoinHostPort function), and
// writes what Go produced as the expected outputs of the Rust template tests.
//
// Usage: haproxy-golden -data data.json -out DIR TEMPLATE...
//
// For every template T and every data set D of data.json it writes DIR/<T>/<D>.cfg, or
// DIR/<T>/<D>.err holding Go's error when Go refuses the template or fails to render it.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"
)

// BackendServer and ConfigData have the field names and types of CAPD's loadbalancer.ConfigData.
type BackendServer struct {
	Address string
	Weight  int
}

type ConfigData struct {
	FrontendControlPlanePort string
	BackendControlPlanePort  string
	BackendServers           map[string]BackendServer
	IPv6                     bool
}

func main() {
	dataPath := flag.String("data", "", "JSON file: data set name -> ConfigData")
	outDir := flag.String("out", "", "directory for the expected outputs")
	flag.Parse()
	if *dataPath == "" || *outDir == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: haproxy-golden -data data.json -out DIR TEMPLATE...")
		os.Exit(2)
	}
	raw, err := os.ReadFile(*dataPath)
	check(err)
	var sets map[string]ConfigData
	check(json.Unmarshal(raw, &sets))
	names := make([]string, 0, len(sets))
	for name := range sets {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, path := range flag.Args() {
		src, err := os.ReadFile(path)
		check(err)
		base := strings.TrimSuffix(filepath.Base(path), ".tmpl")
		dir := filepath.Join(*outDir, base)
		check(os.MkdirAll(dir, 0o755))
		for _, name := range names {
			out, err := render(string(src), sets[name])
			if err != nil {
				check(os.WriteFile(filepath.Join(dir, name+".err"), []byte(err.Error()+"\n"), 0o644))
				continue
			}
			check(os.WriteFile(filepath.Join(dir, name+".cfg"), out, 0o644))
		}
	}
}

// render does what CAPD's loadbalancer.Config does with a template.
func render(src string, data ConfigData) ([]byte, error) {
	t, err := template.New("loadbalancer-config").Funcs(template.FuncMap{
		"JoinHostPort": net.JoinHostPort,
	}).Parse(src)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
