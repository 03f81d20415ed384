package model

import (
	"cmp"
	"regexp"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// The annotations of this family that other files name (model/annotationtable.go has their rows).
const (
	KeyLoadBalance            = "load-balance"
	KeyProxyNextUpstreamTries = "proxy-next-upstream-tries"
)

// Policy is how the Lua balancer treats one backend: the algorithm, session
// affinity, retries and passive health, and a canary. The zero Policy is
// round robin with the documented defaults. It is comparable on purpose:
// the plan compares it with what Lua holds, as it does the endpoints.
type Policy struct {
	// Algorithm is "" (round robin), AlgorithmEWMA or AlgorithmHash; or
	// AlgorithmRoundRobin when an Ingress names it against a ConfigMap
	// load-balance of ewma. Build sets a backend's "" to that load-balance.
	Algorithm string `json:"algorithm,omitempty"`
	// HashBy are the nginx variables (without "$", separated by spaces)
	// whose values, concatenated, are hashed when Algorithm is
	// AlgorithmHash: "request_uri", "http_x_user", "host request_uri".
	HashBy string `json:"hash_by,omitempty"`
	// HashSubset is the size of the subset of endpoints a hash value maps
	// to (upstream-hash-by-subset, -subset-size): the first HashSubset
	// distinct endpoints clockwise from the value on the ring, taken in
	// turn. 0 maps each value to one endpoint. Only with AlgorithmHash.
	HashSubset int `json:"hash_subset,omitempty"`

	// Affinity is "" or "cookie": a client is pinned to an endpoint by a
	// cookie the balancer sets.
	Affinity string `json:"affinity,omitempty"`
	// AffinityMode is "" (balanced: the cookie holds a position on the
	// hash ring, so that when endpoints are added some clients move to
	// them) or AffinityPersistent (the cookie names the endpoint: a client
	// stays on it while it lives).
	AffinityMode string `json:"affinity_mode,omitempty"`
	// Cookie* shape the affinity cookie.
	CookieName     string `json:"cookie_name,omitempty"`
	CookieMaxAge   int    `json:"cookie_max_age,omitempty"` // seconds; 0: a session cookie
	CookiePath     string `json:"cookie_path,omitempty"`
	CookieSameSite string `json:"cookie_samesite,omitempty"` // "", "Strict", "Lax", "None"
	CookieSecure   bool   `json:"cookie_secure,omitempty"`
	CookieDomain   string `json:"cookie_domain,omitempty"`  // "" : host-only
	CookieExpires  int    `json:"cookie_expires,omitempty"` // seconds from now; 0: no Expires
	// CookieChangeOnFailure re-pins a client whose endpoint failed; an
	// endpoint that is gone always re-pins.
	CookieChangeOnFailure bool `json:"cookie_change_on_failure,omitempty"`
	// CookieConditionalSameSiteNone leaves CookieSameSite "None" out of the
	// cookie for clients known to refuse or mishandle it (by User-Agent,
	// the list ingress-nginx checks). Only with CookieSameSite "None".
	CookieConditionalSameSiteNone bool `json:"cookie_conditional_samesite_none,omitempty"`

	// Tries bounds the endpoints one request tries, the first included
	// (0: DefaultTries).
	Tries int `json:"tries,omitempty"`
	// MaxFails failures of an endpoint within FailTimeout seconds take it
	// out for FailTimeout seconds (0: DefaultMaxFails, DefaultFailTimeout).
	MaxFails    int `json:"max_fails,omitempty"`
	FailTimeout int `json:"fail_timeout,omitempty"`

	// Fallback is the Name of the backend that answers while this one has
	// no endpoints (annotation default-backend); "" for a 503.
	Fallback string `json:"fallback,omitempty"`

	// Canary is the Name of the backend that takes part of the traffic:
	// requests with CanaryHeader (equal to CanaryHeaderValue when set, else
	// "always"), then those with the cookie CanaryCookie = "always", then
	// CanaryWeight of every CanaryWeightTotal. A header or cookie "never"
	// keeps a request off the canary.
	Canary            string `json:"canary,omitempty"`
	CanaryWeight      int    `json:"canary_weight,omitempty"`
	CanaryWeightTotal int    `json:"canary_weight_total,omitempty"`
	CanaryHeader      string `json:"canary_header,omitempty"`
	CanaryHeaderValue string `json:"canary_header_value,omitempty"`
	// CanaryHeaderPattern is a regex (PCRE in Lua) the header's value must
	// match to choose the canary; unused when CanaryHeaderValue is set.
	CanaryHeaderPattern string `json:"canary_header_pattern,omitempty"`
	CanaryCookie        string `json:"canary_cookie,omitempty"`
	// CanaryAffinityLegacy (affinity-canary-behavior: legacy on the canary
	// Ingress) makes the split ignore the affinity cookie. By default
	// (sticky) the canary's backend carries this backend's affinity, and a
	// client the cookie pins to this backend or to the canary stays there
	// before any other rule is asked.
	CanaryAffinityLegacy bool `json:"canary_affinity_legacy,omitempty"`
}

// AffinityPersistent is Policy.AffinityMode for affinity-mode: persistent.
const AffinityPersistent = "persistent"

// Algorithms of Policy.Algorithm.
const (
	AlgorithmRoundRobin = "round_robin"
	AlgorithmEWMA       = "ewma"
	AlgorithmHash       = "hash"
)

// Defaults of Policy, as the Lua balancer applies them.
const (
	DefaultTries       = 3
	DefaultMaxFails    = 3
	DefaultFailTimeout = 10 // seconds
	// DefaultHashSubset is upstream-hash-by-subset-size when absent or 0.
	DefaultHashSubset = 3
	// MaxHashSubset bounds upstream-hash-by-subset-size.
	MaxHashSubset = 1000
)

// variantSeparator joins a backend's name and the Ingress whose Policy it
// carries. Neither a Service, a port name nor an Ingress name can hold it.
const variantSeparator = "@"

// baseBackendName strips the Ingress of a variant's name.
func baseBackendName(name string) string {
	base, _, _ := strings.Cut(name, variantSeparator)
	return base
}

// DescribeBackend names a backend for people: "Service default/demo port
// 80" for "default/demo:80" and for each of its variants (a Policy, a
// canary, service-upstream). The name itself is the Lua balancer's key.
func DescribeBackend(name string) string {
	base := baseBackendName(name)
	service, port, ok := strings.Cut(base, ":")
	if !ok {
		return name
	}
	return "Service " + service + " port " + port
}

// policyFor reads the Policy of the backends of ing from its annotations.
// Each part is read by its own function; a bad value is a Problem on the
// Ingress and leaves that part at its default.
func (b *builder) policyFor(ing *networkingv1.Ingress) Policy {
	var p Policy
	b.readLoadBalance(ing, &p)
	b.readAffinity(ing, &p)
	b.readRetries(ing, &p)
	if ref, ok := b.defaultBackendOf(ing); ok {
		p.Fallback = ref.name
	}
	return p
}

// nginxVariable is one nginx variable, as upstream-hash-by names it.
var nginxVariables = regexp.MustCompile(`^(\$[a-z_][a-z0-9_]{0,63}){1,4}$`)

// cookieName is an RFC 6265 token of bounded length.
var cookieName = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]{1,64}$")

// cookiePath is a cookie Path attribute: printable, no ";", bounded.
var cookiePath = regexp.MustCompile(`^/[\x21-\x3a\x3c-\x7e]{0,255}$`)

// cookieDomain is a lower-case domain name, with an optional leading dot
// (which browsers ignore).
var cookieDomain = regexp.MustCompile(`^\.?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)

// The checks of the policy's keys (the table's Check column).
var (
	checkLoadBalance  = oneOf(AlgorithmRoundRobin, AlgorithmEWMA)
	checkHashBy       = matching(nginxVariables, `is not one to four nginx variables such as "$request_uri", "$http_x_user", "$cookie_id" or "$host$request_uri"`)
	checkAffinity     = oneOf("cookie")
	checkAffinityMode = oneOf("balanced", AffinityPersistent)
	checkCookieName   = matching(cookieName, "is not a cookie name (1 to 64 token characters)")
	checkCookiePath   = matching(cookiePath, `is not a cookie path (starts with "/", printable, no ";")`)
	checkSameSite     = oneOf("Strict", "Lax", "None")
)

// checkCookieDomain checks session-cookie-domain (any case).
func checkCookieDomain(value string) string {
	if domain := strings.ToLower(value); cookieDomain.MatchString(domain) && len(domain) <= 253 {
		return ""
	}
	return "is not a domain name (labels of letters, digits and '-', an optional leading '.')"
}

// readLoadBalance reads load-balance, upstream-hash-by and its subset
// keys. The subset keys are checked even without upstream-hash-by, where
// they do nothing (as in ingress-nginx).
func (b *builder) readLoadBalance(ing *networkingv1.Ingress, p *Policy) {
	subset := b.boolAnnotation(ing, "upstream-hash-by-subset", false)
	// 0, as in ingress-nginx, is the default size.
	subsetSize := b.intAnnotation(ing, "upstream-hash-by-subset-size", 0, 0, MaxHashSubset)
	if value, key, ok := lookupAnnotation(ing, KeyLoadBalance); ok {
		switch value {
		case AlgorithmRoundRobin:
			if b.loadBalance != "" {
				// Round robin against the ConfigMap's default: a Policy
				// (and a backend variant) of its own.
				p.Algorithm = AlgorithmRoundRobin
			}
		case AlgorithmEWMA:
			p.Algorithm = AlgorithmEWMA
		default:
			b.annotationProblem(ing, key, value, checkLoadBalance(value)+"; round robin is used")
		}
	}
	if value, key, ok := lookupAnnotation(ing, "upstream-hash-by"); ok {
		if reason := checkHashBy(value); reason != "" {
			b.annotationProblem(ing, key, value, reason+"; consistent hashing is off")
			return
		}
		p.Algorithm, p.HashBy = AlgorithmHash, strings.Join(strings.Split(value[1:], "$"), " ")
		if subset {
			p.HashSubset = cmp.Or(subsetSize, DefaultHashSubset)
		}
	}
}

// readAffinity reads affinity and the session-cookie-* family.
func (b *builder) readAffinity(ing *networkingv1.Ingress, p *Policy) {
	value, key, ok := lookupAnnotation(ing, "affinity")
	if !ok {
		return
	}
	if reason := checkAffinity(value); reason != "" {
		b.annotationProblem(ing, key, value, reason+"; no session affinity")
		return
	}
	p.Affinity, p.CookieName, p.CookiePath = "cookie", "INGRESSCOOKIE", "/"
	if value, key, ok := lookupAnnotation(ing, "affinity-mode"); ok {
		switch value {
		case "balanced":
		case AffinityPersistent:
			p.AffinityMode = AffinityPersistent
		default:
			b.annotationProblem(ing, key, value, checkAffinityMode(value)+"; balanced is used")
		}
	}
	if value, key, ok := lookupAnnotation(ing, "session-cookie-name"); ok {
		if reason := checkCookieName(value); reason == "" {
			p.CookieName = value
		} else {
			b.annotationProblem(ing, key, value, reason+"; INGRESSCOOKIE is used")
		}
	}
	if value, key, ok := lookupAnnotation(ing, "session-cookie-path"); ok {
		if reason := checkCookiePath(value); reason == "" {
			p.CookiePath = value
		} else {
			b.annotationProblem(ing, key, value, reason+`; "/" is used`)
		}
	}
	p.CookieMaxAge = b.intAnnotation(ing, "session-cookie-max-age", 0, 0, 10*365*24*3600)
	if value, key, ok := lookupAnnotation(ing, "session-cookie-samesite"); ok {
		switch value {
		case "Strict", "Lax", "None":
			p.CookieSameSite = value
		default:
			b.annotationProblem(ing, key, value, checkSameSite(value)+"; no SameSite attribute")
		}
	}
	// Read whatever the SameSite, so that a bad value is reported; it
	// means something with "None" only.
	conditional := b.boolAnnotation(ing, "session-cookie-conditional-samesite-none", false)
	p.CookieConditionalSameSiteNone = conditional && p.CookieSameSite == "None"
	p.CookieSecure = b.boolAnnotation(ing, "session-cookie-secure", false)
	p.CookieExpires = b.intAnnotation(ing, "session-cookie-expires", 0, 0, 10*365*24*3600)
	if value, key, ok := lookupAnnotation(ing, "session-cookie-domain"); ok {
		if reason := checkCookieDomain(value); reason == "" {
			p.CookieDomain = strings.ToLower(value)
		} else {
			b.annotationProblem(ing, key, value, reason+"; the cookie is for the request's host only")
		}
	}
	p.CookieChangeOnFailure = b.boolAnnotation(ing, "session-cookie-change-on-failure", false)
}

// readRetries reads proxy-next-upstream-tries and the passive health
// settings max-fails and fail-timeout.
func (b *builder) readRetries(ing *networkingv1.Ingress, p *Policy) {
	p.Tries = b.intAnnotation(ing, KeyProxyNextUpstreamTries, 0, 1, 20)
	p.MaxFails = b.intAnnotation(ing, "max-fails", 0, 1, 1000)
	p.FailTimeout = b.intAnnotation(ing, "fail-timeout", 0, 1, 3600)
}

// intAnnotation reads an integer annotation in [min, max]; absent or bad,
// it is def (a bad one is a Problem).
func (b *builder) intAnnotation(ing *networkingv1.Ingress, name string, def, min, max int) int {
	value, key, ok := lookupAnnotation(ing, name)
	if !ok {
		return def
	}
	if reason := intIn("an integer", min, max)(value); reason != "" {
		b.annotationProblem(ing, key, value, reason+"; the default is used")
		return def
	}
	n, _ := strconv.Atoi(value)
	return n
}
