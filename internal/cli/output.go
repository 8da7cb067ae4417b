package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kubectl/pkg/cmd/get"
	"sigs.k8s.io/yaml"
)

// Output formats (-o) besides table, wide and json, as kubectl spells them.
const (
	OutputYAML = "yaml"
	OutputName = "name"
)

// templateFormats are kubectl's -o FORMAT=ARGUMENT formats.
var templateFormats = []string{"jsonpath", "jsonpath-as-json", "jsonpath-file", "go-template", "go-template-file", "custom-columns", "custom-columns-file"}

// CheckOutput rejects an output format the command does not print, naming those it does. wide says whether the
// command has a wide table.
func CheckOutput(format string, wide bool) error {
	formats := []string{OutputTable, OutputJSON, OutputYAML, OutputName}
	if wide {
		formats = append(formats, OutputWide)
	}
	name, arg, hasArg := strings.Cut(format, "=")
	for _, f := range formats {
		if format == f {
			return nil
		}
	}
	for _, f := range templateFormats {
		if name == f {
			if !hasArg || arg == "" {
				return &ExitError{Code: ExitAPI, Err: fmt.Errorf("-o %s needs an argument: -o %s=...", name, name)}
			}
			return nil
		}
	}
	return &ExitError{Code: ExitAPI, Err: fmt.Errorf("unknown output format %q: use one of %s, and %s",
		format, strings.Join(formats, ", "), strings.Join(templateFormats, "=..., ")+"=...")}
}

// printDocument writes a command's result in an output format other than its tables: json and yaml print doc (the
// command's stable JSON document); name prints names; jsonpath and go-template run over templateRoot (doc, or for a
// document that is a JSON array, {"items": doc}); custom-columns print one line per row.
func printDocument(w io.Writer, format string, noHeaders bool, doc, templateRoot any, rows []any, names []runtime.Object) error {
	name, arg, _ := strings.Cut(format, "=")
	switch {
	case format == OutputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	case format == OutputYAML:
		data, err := yaml.Marshal(doc)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	case format == OutputName:
		p := &printers.NamePrinter{}
		for _, n := range names {
			if err := p.PrintObj(n, w); err != nil {
				return err
			}
		}
		return nil
	case name == "custom-columns" || name == "custom-columns-file":
		var p *get.CustomColumnsPrinter
		var err error
		if name == "custom-columns" {
			p, err = get.NewCustomColumnsPrinterFromSpec(arg, scheme.Codecs.UniversalDecoder(), noHeaders)
		} else {
			var f *os.File
			if f, err = os.Open(arg); err == nil {
				defer f.Close()
				p, err = get.NewCustomColumnsPrinterFromTemplate(f, scheme.Codecs.UniversalDecoder())
				if p != nil {
					p.NoHeaders = noHeaders
				}
			}
		}
		if err != nil {
			return &ExitError{Code: ExitAPI, Err: fmt.Errorf("-o %s: %s", format, oneLine(err.Error()))}
		}
		list := &unstructured.UnstructuredList{}
		for _, r := range rows {
			obj, err := asMap(r)
			if err != nil {
				return err
			}
			list.Items = append(list.Items, unstructured.Unstructured{Object: obj})
		}
		return p.PrintObj(list, w)
	}
	var p printers.ResourcePrinter
	var err error
	if strings.HasPrefix(name, "go-template") {
		flags := genericclioptions.NewGoTemplatePrintFlags()
		flags.TemplateArgument = &arg
		p, err = flags.ToPrinter(name)
	} else {
		p, err = genericclioptions.NewJSONPathPrintFlags(arg, false).ToPrinter(name)
	}
	if err != nil {
		return &ExitError{Code: ExitAPI, Err: fmt.Errorf("-o %s: %s", format, oneLine(err.Error()))}
	}
	return printTemplate(w, p, templateRoot)
}

func printTemplate(w io.Writer, p printers.ResourcePrinter, root any) error {
	obj, err := asMap(root)
	if err != nil {
		return err
	}
	if err := p.PrintObj(&unstructured.Unstructured{Object: obj}, w); err != nil {
		return &ExitError{Code: ExitAPI, Err: fmt.Errorf("%s", oneLine(err.Error()))}
	}
	return nil
}

// asMap is v as the JSON object it encodes to.
func asMap(v any) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(data, &m)
}

// named is an object of the API group's kind and name, for -o name (kubectl's KIND[.GROUP]/NAME).
func named(group, kind, name string) runtime.Object {
	apiVersion := "v1"
	if group != "" {
		apiVersion = group + "/v1"
	}
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}, ObjectMeta: metav1.ObjectMeta{Name: name}}
}
