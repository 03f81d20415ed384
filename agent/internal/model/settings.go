package model

// ProxySettings returns the location's proxy settings (the zero ones when
// Proxy is nil).
func (l Location) ProxySettings() ProxySettings {
	return valueOf(l.Proxy)
}

// AccessSettings returns the location's access settings (the zero ones
// when Access is nil).
func (l Location) AccessSettings() AccessSettings {
	return valueOf(l.Access)
}

// SnippetSettings returns the location's snippet settings (the zero ones
// when Snippet is nil).
func (l Location) SnippetSettings() SnippetSettings {
	return valueOf(l.Snippet)
}

// PolicyValue returns the backend's policy (the zero one when Policy is
// nil).
func (b Backend) PolicyValue() Policy {
	return valueOf(b.Policy)
}

// valueOf returns *p, or T's zero value when p is nil.
func valueOf[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// locationSettings are a location's Proxy, Access and Snippet while
// FinishRoute works them out, by value.
type locationSettings struct {
	proxy   ProxySettings
	access  AccessSettings
	snippet SnippetSettings
}

// sharedSettings hold one copy of each distinct setting the build gave a
// location, so that locations of like settings share it (Location.Proxy).
// Backend policies are shared the same way (Builder.policies).
type sharedSettings struct {
	proxy   map[ProxySettings]*ProxySettings
	access  map[AccessSettings]*AccessSettings
	snippet map[SnippetSettings]*SnippetSettings
}

// shareSettings sets loc's Proxy, Access and Snippet to the shared copies
// of set's.
func (s *sharedSettings) shareSettings(loc *Location, set *locationSettings) {
	loc.Proxy = shareSetting(&s.proxy, set.proxy)
	loc.Access = shareSetting(&s.access, set.access)
	loc.Snippet = shareSetting(&s.snippet, set.snippet)
}

// shareSetting returns the copy of v in table, adding one when there is
// none; nil for the zero value.
func shareSetting[T comparable](table *map[T]*T, v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	if p, ok := (*table)[v]; ok {
		return p
	}
	if *table == nil {
		*table = map[T]*T{}
	}
	p := &v
	(*table)[v] = p
	return p
}
