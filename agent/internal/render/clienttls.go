package render

import (
	"fmt"

	"github.com/restysync/restysync/agent/internal/model"
)

// clientTLSServerView is the server block of a host that checks client
// certificates (model.ClientTLS). Every other host is served by the
// default server; this one answers the same locations through the same
// router and profiles, with ssl_verify_client on top.
type clientTLSServerView struct {
	Host      string
	CAFile    string
	CRLFile   string
	Verify    string
	Depth     int
	ErrorPage string
}

var clientVerifyModes = map[string]bool{"on": true, "optional": true, "optional_no_ca": true}

// clientTLSServers returns the server blocks of m's hosts that check client
// certificates, in host order.
func clientTLSServers(m model.Model) ([]clientTLSServerView, error) {
	var out []clientTLSServerView
	for _, srv := range m.Servers {
		c := srv.ClientTLS
		if c.CAFile == "" || !srv.HTTPS {
			continue
		}
		if _, err := serverName(srv.Host); err != nil {
			return nil, err
		}
		if !clientVerifyModes[c.Verify] || c.Depth < 1 || c.Depth > 100 {
			return nil, fmt.Errorf("host %s: client certificate settings %+v", srv.Host, c)
		}
		for _, f := range []string{c.CAFile, c.CRLFile, c.ErrorPage} {
			if _, err := Quote(f); err != nil {
				return nil, fmt.Errorf("host %s: %w", srv.Host, err)
			}
		}
		out = append(out, clientTLSServerView{Host: srv.Host, CAFile: c.CAFile, CRLFile: c.CRLFile,
			Verify: c.Verify, Depth: c.Depth, ErrorPage: c.ErrorPage})
	}
	return out, nil
}
