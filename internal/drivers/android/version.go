package android

import (
	"fmt"
	"strconv"
	"strings"
)

// releaseAPI maps Android release versions to API levels. Requests name the
// release ("15"); system images name the level (android-35).
var releaseAPI = []struct {
	release string
	api     int
}{
	{"5.0", 21}, {"5.1", 22}, {"6.0", 23}, {"7.0", 24}, {"7.1", 25},
	{"8.0", 26}, {"8.1", 27}, {"9", 28}, {"10", 29}, {"11", 30},
	{"12", 31}, {"12L", 32}, {"13", 33}, {"14", 34}, {"15", 35}, {"16", 36},
}

// newestKnownAPI is the level a download targets when nothing is installed
// and the request names no OS.
const newestKnownAPI = 36

// apiForRelease maps "15", "15.0", "7.1.1" or "12L" to its API level.
func apiForRelease(rel string) (int, bool) {
	rel = strings.TrimSpace(rel)
	for _, cand := range releaseCandidates(rel) {
		for _, r := range releaseAPI {
			if strings.EqualFold(r.release, cand) {
				return r.api, true
			}
		}
	}
	return 0, false
}

// releaseCandidates yields rel and its shorter spellings: "7.1.1" → "7.1",
// "15.0" → "15".
func releaseCandidates(rel string) []string {
	out := []string{rel}
	parts := strings.Split(rel, ".")
	if len(parts) > 2 {
		out = append(out, parts[0]+"."+parts[1])
	}
	if len(parts) >= 2 && strings.Trim(strings.Join(parts[1:], ""), "0") == "" {
		out = append(out, parts[0])
	}
	if len(parts) == 1 {
		out = append(out, rel+".0")
	}
	return out
}

// releaseForAPI is the spec's OSVersion for a level: the release when the
// table knows it, "API <n>" otherwise, so a brand-new level still resolves.
func releaseForAPI(api int) string {
	for _, r := range releaseAPI {
		if r.api == api {
			return r.release
		}
	}
	return "API " + strconv.Itoa(api)
}

// parseOSRequest reads a requested OS version: a release ("15", "15.0",
// "Android 15") or an explicit level ("API 35", "api-35", "android-35").
func parseOSRequest(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	for _, p := range []string{"api level", "api", "android-"} {
		if rest, ok := strings.CutPrefix(t, p); ok {
			rest = strings.TrimLeft(rest, " -_")
			n, err := strconv.Atoi(rest)
			if err != nil || n <= 0 || n > 1000 {
				return 0, fmt.Errorf("%q is not an API level", s)
			}
			return n, nil
		}
	}
	t = strings.TrimSpace(strings.TrimPrefix(t, "android"))
	if api, ok := apiForRelease(t); ok {
		return api, nil
	}
	return 0, fmt.Errorf("%q is not an Android release simlock knows (%s–%s) nor an API level (\"API 35\")",
		s, releaseAPI[0].release, releaseAPI[len(releaseAPI)-1].release)
}
