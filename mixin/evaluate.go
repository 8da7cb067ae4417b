package mixin

// Evaluate evaluates a jsonnet snippet over the embedded sources, which it imports by their paths in this directory
// ('mixin.libsonnet', 'lib/utils.libsonnet'), with extCode as its external code variables (std.extVar). It needs no
// checkout: a binary carries the mixin with it.
func Evaluate(snippet string, extCode map[string]string) (string, error) {
	vm := newVM()
	for name, code := range extCode {
		vm.ExtCode(name, code)
	}
	return vm.EvaluateAnonymousSnippet("snippet.jsonnet", snippet)
}
