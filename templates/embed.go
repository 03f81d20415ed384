// Package templates holds the nginx.conf template of the render stage
// (model → render → nginx.conf). The template is dumb: it prints typed view
// structs that package render builds, and every user-supplied string goes
// through render's quote function.
package templates

import _ "embed"

// NginxConf is the text/template source of nginx.conf.
//
//go:embed nginx.conf.tmpl
var NginxConf string
