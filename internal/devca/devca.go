// Package devca is chubbyd's built-in certificate authority for setting up
// a TLS cell without other tools (like `consul tls ca create`): a CA key
// and certificate, server and client certificates signed by it, and gossip
// encryption keys. Keys are ECDSA P-256; files are PEM, the keys written
// with mode 0600. Nothing is overwritten.
//
// A server certificate carries the role name wire.ServerName(cell) among its DNS
// names and is valid for both server and client authentication (servers
// dial each other); a client certificate carries no such name and is valid
// for client authentication only, so it cannot pass as a server. The
// certificate's common name is the principal.
package devca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chubby-dev/chubby/wire"
)

// The files of a CA directory.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
)

// cellPrefix marks the cell in the CA's subject (OrganizationalUnit).
const cellPrefix = "cell="

// CreateCA writes a new CA for cell into dir (created if missing):
// ca.pem and ca-key.pem, valid for days.
func CreateCA(dir, cell string, days int) error {
	if cell == "" || strings.ContainsAny(cell, "/ \t\n") {
		return fmt.Errorf("cell name %q", cell)
	}
	if days <= 0 {
		return fmt.Errorf("-days %d: want at least 1", days)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := absent(filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "chubby " + cell + " CA", OrganizationalUnit: []string{cellPrefix + cell}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.AddDate(0, 0, days),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	return writePair(dir, CAFile, CAKeyFile, der, key)
}

// CertRequest is what CreateCert issues.
type CertRequest struct {
	Name   string // the common name: the principal (a server's node id)
	Server bool   // a server certificate (server and client auth, the role name)
	IPs    []net.IP
	DNS    []string
	Days   int
	// NotBefore and NotAfter, when both set, are the validity window
	// instead of Days (tests: a certificate that expired or is not yet
	// valid).
	NotBefore, NotAfter time.Time
}

// CreateCert writes NAME.pem and NAME-key.pem into dir, signed by the CA
// in dir. A server certificate gets ServerName of the CA's cell, "localhost"
// and 127.0.0.1 besides the names asked for.
func CreateCert(dir string, r CertRequest) (certPath, keyPath string, err error) {
	if r.Name == "" || strings.ContainsAny(r.Name, "/\\ \t\n") {
		return "", "", fmt.Errorf("certificate name %q: want a name without spaces or slashes", r.Name)
	}
	now := time.Now()
	notBefore, notAfter := now.Add(-time.Minute), now.AddDate(0, 0, r.Days)
	switch {
	case !r.NotBefore.IsZero() && !r.NotAfter.IsZero():
		if !r.NotAfter.After(r.NotBefore) {
			return "", "", fmt.Errorf("validity %v to %v: ends before it starts", r.NotBefore, r.NotAfter)
		}
		notBefore, notAfter = r.NotBefore, r.NotAfter
	case r.Days <= 0:
		return "", "", fmt.Errorf("-days %d: want at least 1", r.Days)
	}
	ca, caKey, err := LoadCA(dir)
	if err != nil {
		return "", "", err
	}
	cell := CellOf(ca)
	certPath, keyPath = filepath.Join(dir, r.Name+".pem"), filepath.Join(dir, r.Name+"-key.pem")
	if err := absent(certPath, keyPath); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: r.Name},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		IPAddresses:  r.IPs,
		DNSNames:     r.DNS,
	}
	if r.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.DNSNames = append([]string{wire.ServerName(cell), "localhost"}, r.DNS...)
		tmpl.IPAddresses = append([]net.IP{net.ParseIP("127.0.0.1")}, r.IPs...)
	} else {
		for _, d := range r.DNS {
			if wire.IsServerName(d) {
				return "", "", fmt.Errorf("a client certificate cannot carry the server role name %q", d)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	return certPath, keyPath, writePair(dir, r.Name+".pem", r.Name+"-key.pem", der, key)
}

// LoadCA reads the CA certificate and key of dir.
func LoadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, nil, fmt.Errorf("no CA in %s (chubbyd tls ca create): %w", dir, err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("no CA key in %s: %w", dir, err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || cb.Type != "CERTIFICATE" || kb == nil || kb.Type != "EC PRIVATE KEY" {
		return nil, nil, fmt.Errorf("%s: not a PEM CA certificate and EC key", dir)
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	if !ca.IsCA {
		return nil, nil, fmt.Errorf("%s is not a CA certificate", filepath.Join(dir, CAFile))
	}
	return ca, key, nil
}

// CellOf is the cell a CA was made for ("" if none is recorded).
func CellOf(ca *x509.Certificate) string {
	for _, ou := range ca.Subject.OrganizationalUnit {
		if c, ok := strings.CutPrefix(ou, cellPrefix); ok {
			return c
		}
	}
	return ""
}

// Keygen returns a new gossip encryption key: 32 random bytes (AES-256, as
// memberlist takes them), base64.
func Keygen() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err)
	}
	return n
}

// absent fails if any of the files exists: nothing is overwritten.
func absent(paths ...string) error {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%s exists; not overwriting it", p)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func writePair(dir, certName, keyName string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeNew(filepath.Join(dir, keyName), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return writeNew(filepath.Join(dir, certName), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TLSConfig is a TLS configuration for the certificate NAME of dir (as
// CreateCert wrote it) trusting dir's CA: what a client of the cell (or a
// test) dials with. ServerName is left empty; set it to wire.ServerName(cell)
// for standard verification, or leave it to client.Config.TLS, which
// checks the server role name itself.
func TLSConfig(dir, name string) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem"))
	if err != nil {
		return nil, err
	}
	ca, _, err := LoadCA(dir)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}
