package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// shaped is a type that takes more than one shape of YAML under its key (say a list or a mapping). It decodes itself
// with the decoder, so its errors name their keys too.
type shaped interface {
	decodeYAML(d *decoder, n *yaml.Node, path string) error
}

// decoder fills a struct from a YAML node tree strictly: unknown and duplicate keys are errors, and every error
// names the key path (for example pools[1].maxUnavailable). It records which keys were present so defaults apply
// only to absent keys, never to an explicit zero.
type decoder struct {
	present map[string]bool
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if v.Kind() == reflect.Pointer {
		if isNull(n) {
			v.Set(reflect.Zero(v.Type()))
			return nil
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return d.decode(n, v.Elem(), path)
	}
	if s, ok := v.Addr().Interface().(shaped); ok {
		return s.decodeYAML(d, n, path)
	}
	if u, ok := v.Addr().Interface().(yaml.Unmarshaler); ok {
		if n.Kind != yaml.ScalarNode || isNull(n) {
			return fmt.Errorf("%s: expected a value, got %s", path, describe(n))
		}
		if err := u.UnmarshalYAML(n); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		return d.decodeStruct(n, v, path)
	case reflect.Slice:
		if isNull(n) {
			return nil
		}
		if n.Kind != yaml.SequenceNode {
			return fmt.Errorf("%s: expected a list, got %s", path, describe(n))
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			if err := d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.Map:
		return d.decodeMap(n, v, path)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || isNull(n) {
			return fmt.Errorf("%s: expected a string, got %s", path, describe(n))
		}
		v.SetString(n.Value)
		return nil
	case reflect.Int:
		i, err := strconv.Atoi(n.Value)
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || err != nil {
			return fmt.Errorf("%s: expected a whole number, got %s", path, describe(n))
		}
		v.SetInt(int64(i))
		return nil
	case reflect.Bool:
		b, err := strconv.ParseBool(n.Value)
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || err != nil {
			return fmt.Errorf("%s: expected true or false, got %s", path, describe(n))
		}
		v.SetBool(b)
		return nil
	default:
		return fmt.Errorf("%s: unsupported field type %s", path, v.Type())
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) error {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: expected a mapping, got %s", orTop(path), describe(n))
	}
	fields := map[string]int{}
	var known []string
	for i := range v.NumField() {
		tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
		if tag != "" && tag != "-" {
			fields[tag] = i
			known = append(known, tag)
		}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		keyPath := join(path, key.Value)
		if key.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s: line %d: keys must be strings", orTop(path), key.Line)
		}
		idx, ok := fields[key.Value]
		if !ok {
			return fmt.Errorf("%s: line %d: unknown key (known keys: %s)", keyPath, key.Line, strings.Join(known, ", "))
		}
		if seen[key.Value] {
			return fmt.Errorf("%s: line %d: key given twice", keyPath, key.Line)
		}
		seen[key.Value] = true
		d.present[keyPath] = true
		if err := d.decode(value, v.Field(idx), keyPath); err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) error {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: expected a mapping, got %s", path, describe(n))
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		if key.Kind != yaml.ScalarNode || isNull(key) {
			return fmt.Errorf("%s: line %d: keys must be strings", path, key.Line)
		}
		keyPath := path + "[" + strconv.Quote(key.Value) + "]"
		k := reflect.ValueOf(key.Value)
		if m.MapIndex(k).IsValid() {
			return fmt.Errorf("%s: line %d: key given twice", keyPath, key.Line)
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		if err := d.decode(value, elem, keyPath); err != nil {
			return err
		}
		m.SetMapIndex(k, elem)
	}
	v.Set(m)
	return nil
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return fmt.Sprintf("a mapping (line %d)", n.Line)
	case yaml.SequenceNode:
		return fmt.Sprintf("a list (line %d)", n.Line)
	case yaml.ScalarNode:
		if isNull(n) {
			return fmt.Sprintf("nothing (line %d)", n.Line)
		}
		return fmt.Sprintf("%q (line %d)", n.Value, n.Line)
	default:
		return fmt.Sprintf("an unexpected node (line %d)", n.Line)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orTop(path string) string {
	if path == "" {
		return "top level"
	}
	return path
}
