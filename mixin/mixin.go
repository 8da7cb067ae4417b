// Package mixin renders the monitoring mixin (the jsonnet in this directory) into the files the repository ships:
// Prometheus rule files, the same rules as Kubernetes resources, and Grafana dashboards.
package mixin

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/google/go-jsonnet"
	"gopkg.in/yaml.v3"
)

//go:embed *.libsonnet build.jsonnet alerts dashboards lib rules
var sources embed.FS

// entryPoint evaluates to an object of output path (from the repository root) to file content.
const entryPoint = "build.jsonnet"

// yamlHeader starts every generated YAML file; JSON has no comments, so dashboards go without.
const yamlHeader = "# Generated from mixin/ by `make generate`. DO NOT EDIT.\n"

// GeneratedDirs are the directories (from the repository root) that hold only generated files, besides the
// directories among them.
var GeneratedDirs = []string{"rules", "dashboards", "dashboards/operator-gmp"}

// File is one generated file.
type File struct {
	Path    string // slash-separated, relative to the repository root
	Content []byte
}

// Render evaluates the mixin and returns the generated files sorted by path. YAML paths get YAML, everything else
// indented JSON.
func Render() ([]File, error) {
	outputs, err := newVM().EvaluateFileMulti(entryPoint)
	if err != nil {
		return nil, fmt.Errorf("evaluating mixin: %w", err)
	}
	files := make([]File, 0, len(outputs))
	for name, doc := range outputs {
		var content []byte
		switch path.Ext(name) {
		case ".yaml":
			content, err = jsonToYAML([]byte(doc))
		case ".json":
			content, err = indentJSON([]byte(doc))
		default:
			err = fmt.Errorf("no format for this file extension")
		}
		if err != nil {
			return nil, fmt.Errorf("rendering %s: %w", name, err)
		}
		files = append(files, File{Path: name, Content: content})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// newVM returns a jsonnet VM that imports from the embedded sources.
func newVM() *jsonnet.VM {
	vm := jsonnet.MakeVM()
	vm.Importer(&fsImporter{fsys: sources, cache: map[string]jsonnet.Contents{}})
	return vm
}

func indentJSON(doc []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Indent(&buf, doc, "", "  "); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// jsonToYAML re-encodes a JSON document as block-style YAML, multi-line strings (PromQL expressions) as literal
// blocks so that they read as written.
func jsonToYAML(doc []byte) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, err
	}
	blockStyle(&root)
	var buf bytes.Buffer
	buf.WriteString(yamlHeader)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// blockStyle drops the flow style and quotes JSON gives every node; the encoder quotes where YAML needs it.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && strings.Contains(n.Value, "\n") {
		n.Style = yaml.LiteralStyle
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// fsImporter resolves jsonnet imports inside the embedded sources, relative to the importing file.
type fsImporter struct {
	fsys  fs.FS
	cache map[string]jsonnet.Contents
}

func (im *fsImporter) Import(importedFrom, importedPath string) (jsonnet.Contents, string, error) {
	foundAt := path.Join(path.Dir(importedFrom), importedPath)
	if c, ok := im.cache[foundAt]; ok {
		return c, foundAt, nil
	}
	data, err := fs.ReadFile(im.fsys, foundAt)
	if err != nil {
		return jsonnet.Contents{}, "", fmt.Errorf("import %q from %q: %w", importedPath, importedFrom, err)
	}
	c := jsonnet.MakeContentsRaw(data)
	im.cache[foundAt] = c
	return c, foundAt, nil
}
