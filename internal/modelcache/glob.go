package modelcache

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// globMatcher matches repo paths the way the hub libraries' allow_patterns do (Python fnmatch):
// `*` matches any run of characters including "/", `?` one character, `[seq]`/`[!seq]` a class;
// a pattern ending in "/" matches everything under that folder.
type globMatcher struct {
	patterns []string
	res      []*regexp.Regexp
}

func compileGlobs(patterns []string) (*globMatcher, error) {
	g := &globMatcher{patterns: patterns}
	for _, p := range patterns {
		re, err := globRegexp(p)
		if err != nil {
			return nil, err
		}
		g.res = append(g.res, re)
	}
	return g, nil
}

// match reports whether path matches any pattern; no patterns match everything.
func (g *globMatcher) match(path string) bool {
	if g == nil || len(g.res) == 0 {
		return true
	}
	// Hub file names are UTF-8; the regexps would read an invalid byte as U+FFFD and match "�".
	if !utf8.ValidString(path) {
		return false
	}
	return slices.ContainsFunc(g.res, func(re *regexp.Regexp) bool { return re.MatchString(path) })
}

func globRegexp(pat string) (*regexp.Regexp, error) {
	if pat == "" {
		return nil, fmt.Errorf("--include pattern is empty; give a glob like '*.safetensors'")
	}
	if !utf8.ValidString(pat) {
		return nil, fmt.Errorf("--include pattern %q is not valid UTF-8 (hub file names are): give the pattern in UTF-8", pat)
	}
	if strings.HasSuffix(pat, "/") {
		pat += "*"
	}
	var b strings.Builder
	b.WriteString(`(?s)^`)
	for i := 0; i < len(pat); i++ {
		c := pat[i]
		switch c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '[':
			j := i + 1
			if j < len(pat) && pat[j] == '!' {
				j++
			}
			if j < len(pat) && pat[j] == ']' {
				j++
			}
			for j < len(pat) && pat[j] != ']' {
				j++
			}
			if j >= len(pat) { // no closing ]: a literal [, as fnmatch does
				b.WriteString(`\[`)
				continue
			}
			class, neg := strings.CutPrefix(pat[i+1:j], "!")
			class = strings.NewReplacer(`\`, `\\`, `[`, `\[`).Replace(class)
			switch {
			case neg:
				class = "^" + class
			case strings.HasPrefix(class, "^"):
				class = `\` + class
			}
			b.WriteString("[" + class + "]")
			i = j
		default:
			// A whole UTF-8 character, not its first byte read as a Latin-1 one: "é" matches "é".
			_, size := utf8.DecodeRuneInString(pat[i:])
			b.WriteString(regexp.QuoteMeta(pat[i : i+size]))
			i += size - 1
		}
	}
	b.WriteString(`$`)
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("--include pattern %q is not a valid glob: %w", pat, err)
	}
	return re, nil
}
