package collector

import (
	"io"
	"math"
	"strconv"
	"strings"
)

// TextFamily is the HELP/TYPE header of a family whose samples a collector renders itself.
type TextFamily struct {
	Name string
	Help string
	Type string // "gauge": rendered samples read the same in the text format and OpenMetrics
}

// WriteHeader writes the family's HELP and TYPE lines.
func (f TextFamily) WriteHeader(w io.Writer) error {
	_, err := io.WriteString(w, "# HELP "+f.Name+" "+helpEscaper.Replace(f.Help)+"\n# TYPE "+f.Name+" "+f.Type+"\n")
	return err
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	valueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

// AppendSample appends one sample line, `name{k="v",...} value`, to b. labels alternate names and values; names
// must be valid label names, values are escaped.
func AppendSample(b []byte, name string, value float64, labels ...string) []byte {
	b = append(b, name...)
	if len(labels) > 0 {
		b = append(b, '{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, labels[i]...)
			b = append(b, `="`...)
			b = append(b, valueEscaper.Replace(labels[i+1])...)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	switch {
	case math.IsInf(value, 1):
		b = append(b, "+Inf"...)
	case math.IsInf(value, -1):
		b = append(b, "-Inf"...)
	case math.IsNaN(value):
		b = append(b, "NaN"...)
	default:
		b = strconv.AppendFloat(b, value, 'g', -1, 64)
	}
	return append(b, '\n')
}
