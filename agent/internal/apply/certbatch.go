package apply

import (
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/plan"
)

// certificateBatchBytes bounds, roughly, the body of one POST
// /certificates: a plan with more (the first push at many TLS hosts) is
// sent in batches. nginx's worker checks and stores a push in one go, away
// from its traffic, and OpenSSL's parsing of every certificate and key
// makes that about 0.6 s a MB of P-256 certificates on a 2-core machine
// (0.8 s loaded): a batch of this size (about 1,200 of them) keeps the
// worker well under a second, gets a time limit of its own
// (pushTimeoutFor), and a slow one costs only its own certificates, where
// the whole first push at 50,000 certificates (44 MB) ran out of its 92 s
// on a loaded machine and started again from nothing.
const certificateBatchBytes = 1 << 20

// certBatch is the part of a certificate plan one request sends.
type certBatch struct {
	upserts []model.Certificate
	removes []string
}

// certificateBatches splits cp into batches of about limit bytes each
// (one, when it is no bigger). Lua takes each batch whole or not at all,
// and answers 409 to an upsert of a host another certificate holds that
// the batch leaves alone: so the certificates that hand hosts over to
// each other (one taking a host held, as Lua holds them, by another that
// is removed or upserted with other hosts) always travel together, and no
// host is ever left between its old certificate and its new one, serving
// the default certificate, however a push of the batches ends.
func certificateBatches(cp plan.CertificatePlan, held map[string]plan.HeldCertificate, limit int) []certBatch {
	total := 0
	for _, c := range cp.Upserts {
		total += certificateBytes(c)
	}
	for _, name := range cp.Removes {
		total += len(name) + 3
	}
	if total <= limit {
		return []certBatch{{upserts: cp.Upserts, removes: cp.Removes}}
	}
	together := handOvers(cp.Upserts, held)
	// Each group of names that must travel together, in the plan's order
	// of its first member, as indexes into cp.Upserts (i >= 0) and
	// cp.Removes (-1-i).
	var groups [][]int
	groupOf := map[string]int{}
	add := func(name string, item int) {
		root := together.find(name)
		g, ok := groupOf[root]
		if !ok {
			g = len(groups)
			groupOf[root] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], item)
	}
	for i, c := range cp.Upserts {
		add(c.Name, i)
	}
	for i, name := range cp.Removes {
		add(name, -1-i)
	}
	var batches []certBatch
	var current certBatch
	size := 0
	for _, group := range groups {
		bytes := 0
		for _, item := range group {
			if item >= 0 {
				bytes += certificateBytes(cp.Upserts[item])
			} else {
				bytes += len(cp.Removes[-1-item]) + 3
			}
		}
		if size > 0 && size+bytes > limit {
			batches = append(batches, current)
			current, size = certBatch{}, 0
		}
		for _, item := range group {
			if item >= 0 {
				current.upserts = append(current.upserts, cp.Upserts[item])
			} else {
				current.removes = append(current.removes, cp.Removes[-1-item])
			}
		}
		size += bytes
	}
	if size > 0 {
		batches = append(batches, current)
	}
	return batches
}

// certificateBytes is about the size of c in a push's body: its PEMs
// (each line's newline escaped), name and hosts, and the JSON around them.
func certificateBytes(c model.Certificate) int {
	n := len(c.Name) + len(c.CertPEM) + len(c.CertPEM)/64 + len(c.KeyPEM) + len(c.KeyPEM)/64 + 48
	for _, h := range c.Hosts {
		n += len(h) + 3
	}
	return n
}

// nameSets joins names into sets (a union-find with path halving): the
// names a certificate plan must send in one batch. A set's name has no
// entry.
type nameSets map[string]string

// handOvers joins each upsert's name with the name of the certificate
// held (as Lua holds it) for each of its hosts, when that is another.
func handOvers(upserts []model.Certificate, held map[string]plan.HeldCertificate) nameSets {
	owner := make(map[string]string)
	for name, h := range held {
		for _, host := range h.Hosts {
			owner[host] = name
		}
	}
	sets := nameSets{}
	for _, c := range upserts {
		for _, host := range c.Hosts {
			if o, ok := owner[host]; ok && o != c.Name {
				sets.union(c.Name, o)
			}
		}
	}
	return sets
}

// find returns the name that stands for name's set (one no entry points
// on from).
func (s nameSets) find(name string) string {
	for {
		parent, ok := s[name]
		if !ok {
			return name
		}
		if grand, ok := s[parent]; ok {
			s[name] = grand
		}
		name = parent
	}
}

// union puts a and b in one set.
func (s nameSets) union(a, b string) {
	ra, rb := s.find(a), s.find(b)
	if ra != rb {
		s[ra] = rb
	}
}
