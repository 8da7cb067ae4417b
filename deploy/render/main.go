// Command render writes what `kubectl apply -k DIR` would apply, as one YAML stream: the static install.yaml of
// a release (make release).
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: render KUSTOMIZATION_DIR")
		os.Exit(2)
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "render %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	out, err := resources.AsYaml()
	if err != nil {
		fmt.Fprintf(os.Stderr, "render %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}
