package cli

import (
	"context"
	"slices"
	"strings"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
)

// knownPlatforms are the platforms simlock serves; a flag naming another
// is refused before any daemon is contacted.
var knownPlatforms = []string{"ios", "android"}

// checkPlatform refuses an unknown platform, suggesting the nearest one.
func checkPlatform(p string, optional bool) error {
	if optional && p == "" || slices.Contains(knownPlatforms, p) {
		return nil
	}
	e := contract.Errorf(contract.CodeUnsupportedPlatform, "unknown platform %q (simlock serves %s)", p, strings.Join(knownPlatforms, " and "))
	if s := nearest(p, knownPlatforms); len(s) > 0 {
		return e.WithDetails("suggestions", s).WithNext("did you mean --platform " + s[0] + "?")
	}
	return e.WithNext("pass --platform ios or --platform android")
}

// checkModel refuses a model the running daemon's catalog does not list,
// suggesting near names. Without a running daemon it says nothing: the
// catalog is the daemon's to know, and starting one only to check a name
// would be slower than letting the request fail there.
func (a *app) checkModel(ctx context.Context, platform, model string) error {
	if model == "" || a.url != "" {
		return nil
	}
	c, err := client.Dial(ctx, client.Options{Socket: a.paths().Socket, Principal: a.principal(),
		Name: "simlock-cli " + Version, Credential: a.credential(false)})
	if err != nil {
		return nil
	}
	defer c.Close()
	cat, err := client.Do(ctx, c, contract.CatalogGet, contract.CatalogGetIn{Platform: platform})
	if err != nil {
		return nil
	}
	var names []string
	for _, p := range cat.Platforms {
		if p.Platform != platform || p.Error != "" {
			continue
		}
		for _, m := range p.Models {
			if strings.EqualFold(m.Name, model) || m.Identifier == model {
				return nil
			}
			names = append(names, m.Name)
		}
	}
	if len(names) == 0 {
		return nil // the catalog could not be read: let the daemon judge
	}
	e := contract.Errorf(contract.CodeUnknownModel, "%s has no model %q", platform, model)
	if s := nearest(model, names); len(s) > 0 {
		return e.WithDetails("suggestions", s).WithNext("did you mean --model \"" + s[0] + "\"?")
	}
	return e.WithNext("`simlock catalog --platform " + platform + "` lists the models")
}

// nearest returns the candidates within a small edit distance of s (case
// folded), closest first, or those s is a prefix of.
func nearest(s string, candidates []string) []string {
	type hit struct {
		c string
		d int
	}
	var hits []hit
	ls := strings.ToLower(s)
	limit := max(2, len(ls)/4)
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := editDistance(ls, lc)
		if d <= limit || ls != "" && strings.HasPrefix(lc, ls) {
			hits = append(hits, hit{c, d})
		}
	}
	slices.SortStableFunc(hits, func(x, y hit) int { return x.d - y.d })
	out := make([]string, 0, len(hits))
	for _, h := range hits {
		out = append(out, h.c)
	}
	if len(out) > 3 {
		out = out[:3]
	}
	return out
}

// editDistance is the Levenshtein distance, with an adjacent swap counted
// as one edit (the usual typo: "iso" for "ios").
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
