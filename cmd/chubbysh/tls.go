package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"
)

// tlsConfig is the client TLS of -ca, -cert and -key: all three, or an
// error that says which is missing.
func tlsConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" || certFile == "" || keyFile == "" {
		return nil, &usageError{"TLS needs -ca, -cert and -key together (or CHUBBY_CACERT, CHUBBY_CERT, CHUBBY_KEY)"}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("certificate %s, key %s: %w", certFile, keyFile, err)
	}
	// The cell refuses an expired certificate in the handshake; say so
	// plainly before dialling rather than as a lost connection.
	if leaf, err := x509.ParseCertificate(cert.Certificate[0]); err == nil && time.Now().After(leaf.NotAfter) {
		return nil, fmt.Errorf("certificate %s expired at %s", certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New(caFile + " holds no PEM certificate")
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}
