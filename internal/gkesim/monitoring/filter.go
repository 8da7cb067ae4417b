package monitoring

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The subset of the Monitoring filter language the simulator understands:
//
//	filter     := expression
//	expression := term { "AND" term } | term { "OR" term }   (mixing AND and OR needs parentheses)
//	term       := "NOT" term | "(" expression ")" | selector ("=" | "!=") value
//	selector   := "project" | "metric.type" | "resource.type"
//	            | ("metric" | "resource") "." ("label" | "labels") "." KEY
//	value      := STRING | "one_of" "(" STRING { "," STRING } ")"
//
// Anything else (other selectors, regular expressions, starts_with and the like, unquoted values) is an error, so a
// caller relying on it fails loudly instead of getting unfiltered data. The real API's precedence of AND against OR
// is not something to guess, hence the parentheses rule.

// filter is a parsed filter.
type filter struct {
	root       matcher
	metricType string // the single metric type the filter selects, as the API requires
}

type matcher interface {
	match(s *series) bool
}

type allOf []matcher

func (m allOf) match(s *series) bool {
	for _, c := range m {
		if !c.match(s) {
			return false
		}
	}
	return true
}

type anyOf []matcher

func (m anyOf) match(s *series) bool {
	for _, c := range m {
		if c.match(s) {
			return true
		}
	}
	return false
}

type not struct{ m matcher }

func (m not) match(s *series) bool { return !m.m.match(s) }

// comparison is selector = value, selector = one_of(values...), or their negation.
type comparison struct {
	selector string
	get      func(s *series) (string, bool)
	negate   bool
	values   []string
}

func (c comparison) match(s *series) bool {
	v, ok := c.get(s)
	found := false
	if ok {
		for _, want := range c.values {
			if v == want {
				found = true
				break
			}
		}
	}
	return found != c.negate
}

// parseFilter parses text and checks it names exactly one metric type in its top-level conjunction.
func parseFilter(text string) (*filter, error) {
	toks, err := tokenize(text)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	root, err := p.expression()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, fmt.Errorf("unexpected %s at offset %d", t, t.pos)
	}
	var types []string
	top := []matcher{root}
	if and, ok := root.(allOf); ok {
		top = and
	}
	for _, m := range top {
		if c, ok := m.(comparison); ok && c.selector == "metric.type" && !c.negate && len(c.values) == 1 {
			types = append(types, c.values[0])
		}
	}
	if len(types) != 1 {
		return nil, errors.New(`the filter must select exactly one metric type with metric.type = "..." joined by AND`)
	}
	return &filter{root: root, metricType: types[0]}, nil
}

type tokenKind int

const (
	tokEOF tokenKind = iota
	tokWord
	tokString
	tokEq
	tokNe
	tokLParen
	tokRParen
	tokComma
)

type token struct {
	kind tokenKind
	text string
	pos  int
}

func (t token) String() string {
	switch t.kind {
	case tokEOF:
		return "end of filter"
	case tokString:
		return strconv.Quote(t.text)
	default:
		return "'" + t.text + "'"
	}
}

func tokenize(text string) ([]token, error) {
	var toks []token
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(':
			toks = append(toks, token{tokLParen, "(", i})
			i++
		case c == ')':
			toks = append(toks, token{tokRParen, ")", i})
			i++
		case c == ',':
			toks = append(toks, token{tokComma, ",", i})
			i++
		case c == '=':
			toks = append(toks, token{tokEq, "=", i})
			i++
		case c == '!' && i+1 < len(text) && text[i+1] == '=':
			toks = append(toks, token{tokNe, "!=", i})
			i += 2
		case c == '"':
			s, n, err := unquote(text[i:])
			if err != nil {
				return nil, fmt.Errorf("string at offset %d: %w", i, err)
			}
			toks = append(toks, token{tokString, s, i})
			i += n
		case isWordByte(c):
			j := i
			for j < len(text) && isWordByte(text[j]) {
				j++
			}
			toks = append(toks, token{tokWord, text[i:j], i})
			i = j
		default:
			return nil, fmt.Errorf("unsupported character %q at offset %d", c, i)
		}
	}
	return append(toks, token{tokEOF, "", len(text)}), nil
}

func isWordByte(c byte) bool {
	return c == '_' || c == '.' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// unquote reads the double-quoted string at the start of s (backslash escapes \" and \\), returning it and the
// number of bytes consumed.
func unquote(s string) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '"':
			return b.String(), i + 1, nil
		case '\\':
			if i+1 >= len(s) {
				return "", 0, errors.New("unterminated escape")
			}
			i++
			b.WriteByte(s[i])
		default:
			b.WriteByte(s[i])
		}
	}
	return "", 0, errors.New("unterminated string")
}

type parser struct {
	toks []token
	at   int
}

func (p *parser) peek() token { return p.toks[p.at] }

func (p *parser) next() token {
	t := p.toks[p.at]
	if t.kind != tokEOF {
		p.at++
	}
	return t
}

func (p *parser) expect(kind tokenKind, what string) (token, error) {
	t := p.next()
	if t.kind != kind {
		return t, fmt.Errorf("expected %s at offset %d, found %s", what, t.pos, t)
	}
	return t, nil
}

func (p *parser) expression() (matcher, error) {
	first, err := p.term()
	if err != nil {
		return nil, err
	}
	terms := []matcher{first}
	op := ""
	for {
		t := p.peek()
		if t.kind != tokWord || (t.text != "AND" && t.text != "OR") {
			break
		}
		if op != "" && t.text != op {
			return nil, fmt.Errorf("%s after %s at offset %d: use parentheses to combine AND and OR", t.text, op, t.pos)
		}
		op = t.text
		p.next()
		m, err := p.term()
		if err != nil {
			return nil, err
		}
		terms = append(terms, m)
	}
	switch op {
	case "AND":
		return allOf(terms), nil
	case "OR":
		return anyOf(terms), nil
	default:
		return first, nil
	}
}

func (p *parser) term() (matcher, error) {
	t := p.next()
	switch {
	case t.kind == tokLParen:
		m, err := p.expression()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(tokRParen, "')'"); err != nil {
			return nil, err
		}
		return m, nil
	case t.kind == tokWord && t.text == "NOT":
		m, err := p.term()
		if err != nil {
			return nil, err
		}
		return not{m}, nil
	case t.kind == tokWord:
		return p.comparison(t)
	default:
		return nil, fmt.Errorf("expected a selector at offset %d, found %s", t.pos, t)
	}
}

func (p *parser) comparison(sel token) (matcher, error) {
	get, err := selector(sel.text)
	if err != nil {
		return nil, fmt.Errorf("offset %d: %w", sel.pos, err)
	}
	op := p.next()
	if op.kind != tokEq && op.kind != tokNe {
		return nil, fmt.Errorf("expected = or != after %s at offset %d, found %s", sel.text, op.pos, op)
	}
	c := comparison{selector: sel.text, get: get, negate: op.kind == tokNe}
	v := p.next()
	switch {
	case v.kind == tokString:
		c.values = []string{v.text}
	case v.kind == tokWord && v.text == "one_of":
		if _, err := p.expect(tokLParen, "'(' after one_of"); err != nil {
			return nil, err
		}
		for {
			s, err := p.expect(tokString, "a string in one_of")
			if err != nil {
				return nil, err
			}
			c.values = append(c.values, s.text)
			sep := p.next()
			if sep.kind == tokRParen {
				break
			}
			if sep.kind != tokComma {
				return nil, fmt.Errorf("expected ',' or ')' in one_of at offset %d, found %s", sep.pos, sep)
			}
		}
	default:
		return nil, fmt.Errorf("unsupported value %s for %s at offset %d (a quoted string or one_of(...) is required)", v, sel.text, v.pos)
	}
	return c, nil
}

// selector resolves a selector name to the series field it reads.
func selector(name string) (func(s *series) (string, bool), error) {
	switch name {
	case "project":
		return func(s *series) (string, bool) { v, ok := s.resourceLabels["project_id"]; return v, ok }, nil
	case "metric.type":
		return func(s *series) (string, bool) { return s.metricType, true }, nil
	case "resource.type":
		return func(s *series) (string, bool) { return s.resourceType, true }, nil
	}
	for _, prefix := range []string{"metric.labels.", "metric.label.", "resource.labels.", "resource.label."} {
		key, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		if key == "" || strings.Contains(key, ".") {
			return nil, fmt.Errorf("bad label selector %q", name)
		}
		if strings.HasPrefix(prefix, "metric.") {
			return func(s *series) (string, bool) { v, ok := s.metricLabels[key]; return v, ok }, nil
		}
		return func(s *series) (string, bool) { v, ok := s.resourceLabels[key]; return v, ok }, nil
	}
	return nil, fmt.Errorf("unsupported selector %q", name)
}
