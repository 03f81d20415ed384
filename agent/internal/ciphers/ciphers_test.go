package ciphers

import (
	"math/rand"
	"os/exec"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		list string
		want string // "" accepts; else a part of the reason
	}{
		{"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256", ""},
		{"HIGH:!aNULL:!MD5", ""},
		{"DEFAULT", ""},
		{"DEFAULT:!RC4:@SECLEVEL=2", ""},
		{"ECDHE+AESGCM:!aNULL", ""},
		{"EECDH+AESGCM:EDH+AESGCM", ""},
		{"ALL:!COMPLEMENTOFDEFAULT:!eNULL:@STRENGTH", ""},
		{"HIGH AES,CHACHA20", ""},
		{"HIGH::AES", ""},
		{"HIGH:+AES", ""},
		{"kEECDH+aECDSA+AES128:-ALL:AES256-SHA", ""},
		{"NOTACIPHER", `names "NOTACIPHER", which is not an OpenSSL cipher or alias`},
		{"NOTACIPHER:HIGH", `names "NOTACIPHER"`}, // OpenSSL skips it; a typo is refused here
		{"HIGH:!FOO", `names "FOO"`},
		{"ECDHE+FOO", `names "FOO"`},
		{"TLS_AES_128_GCM_SHA256", `has '_'`},
		{"RC4", "selects no cipher"},
		{"3DES:RC4", "selects no cipher"},
		{"HIGH:-ALL", "selects no cipher"},
		{"HIGH:!ALL:AES", "selects no cipher"},
		{"AES128+AES256", "selects no cipher"},
		{"eNULL:!NULL", "selects no cipher"},
		{"", "selects no cipher"},
		{" ", "selects no cipher"},
		{"@STRENGTH", "selects no cipher"},
		{"HIGH:!", `has "!", which names no cipher`},
		{"HIGH:+", `has "+", which names no cipher`},
		{"HIGH:@FOO", "@STRENGTH and @SECLEVEL=0 to 5"},
		{"HIGH:@SECLEVEL=6", "@STRENGTH and @SECLEVEL=0 to 5"},
		{"HIGH:@SECLEVEL=10", "@STRENGTH and @SECLEVEL=0 to 5"},
		{"HIGH;AES", `has ';'`},
		{"HIGH:DEFAULT", `names "DEFAULT"`},
		{"AES128-SHA+HIGH", "a cipher name joined with '+'"},
		{"HIGH+", "with an empty name"},
		{"HIGH\"", `has '"'`},
		{strings.Repeat("HIGH:", 500), "longer than 2048"},
	}
	for _, tt := range tests {
		t.Run(tt.list, func(t *testing.T) {
			err := Check(tt.list)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check(%q) = %v, want accepted", tt.list, err)
			case tt.want != "" && err == nil:
				t.Errorf("Check(%q) accepted, want %q", tt.list, tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Errorf("Check(%q) = %q, want it to contain %q", tt.list, err, tt.want)
			}
		})
	}
}

// TestCheckAgreesWithOpenSSL holds Check to the real OpenSSL: every list
// Check accepts, `openssl ciphers -- LIST` accepts (SSL_CTX_set_cipher_list,
// as nginx's ssl_ciphers calls it). The lists are the cases of TestCheck
// and random ones made of OpenSSL's names and aliases, unknown words,
// prefixes, '+', separators and commands.
func TestCheckAgreesWithOpenSSL(t *testing.T) {
	needOpenSSL(t)
	lists := []string{"DEFAULT", "HIGH:!aNULL:!MD5", "ECDHE+AESGCM", "NOTACIPHER", "RC4", "HIGH:-ALL", "kRSA:!RSA", "PSK:!aPSK"}
	rng := rand.New(rand.NewSource(1))
	words := append(append([]string{}, aliasNames...), Ciphers...)
	words = append(words, "NOTACIPHER", "FOO", "DEFAULT", "TLS_AES_128_GCM_SHA256", "aes", "SHA512", "TLSv1.3", "EXP", "ALL")
	for range 400 {
		var b strings.Builder
		if rng.Intn(8) == 0 {
			b.WriteString("DEFAULT:")
		}
		for i := range 1 + rng.Intn(5) {
			if i > 0 {
				b.WriteString([]string{":", ":", ",", " ", "::"}[rng.Intn(5)])
			}
			switch rng.Intn(12) {
			case 0:
				b.WriteString([]string{"@STRENGTH", "@SECLEVEL=0", "@SECLEVEL=5", "@SECLEVEL=7", "@X"}[rng.Intn(5)])
				continue
			case 1, 2:
				b.WriteString("!")
			case 3:
				b.WriteString("-")
			case 4:
				b.WriteString("+")
			}
			b.WriteString(words[rng.Intn(len(words))])
			for rng.Intn(3) == 0 {
				b.WriteString("+" + aliasNames[rng.Intn(len(aliasNames))])
			}
		}
		lists = append(lists, b.String())
	}
	accepted, opensslOnly := 0, 0
	for _, list := range lists {
		err := Check(list)
		openssl := exec.Command("openssl", "ciphers", "--", list).Run() == nil
		switch {
		case err == nil && !openssl:
			t.Errorf("Check accepts %q, which openssl refuses", list)
		case err == nil:
			accepted++
		case openssl:
			opensslOnly++
		}
	}
	t.Logf("%d lists: %d accepted by both, %d by openssl only (unknown words it skips, names joined with '+')", len(lists), accepted, opensslOnly)
	if accepted < len(lists)/10 {
		t.Errorf("only %d of %d lists accepted: the random lists test too little", accepted, len(lists))
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{"HIGH:!aNULL", "DEFAULT", "NOTACIPHER", "a+b:!c", "@SECLEVEL=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		if Check(list) == nil && strings.ContainsAny(list, "\"'\\$;{}\n") {
			t.Fatalf("accepted %q, which nginx.conf cannot hold unquoted", list)
		}
	})
}
