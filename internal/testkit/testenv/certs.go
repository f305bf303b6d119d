package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs is a throw-away PKI for TLS tests: a CA, a server certificate for
// 127.0.0.1 and localhost, and a client certificate, written as PEM files.
type Certs struct {
	// Dir holds the files.
	Dir string
	// CA, ServerCert, ServerKey, ClientCert and ClientKey are PEM file
	// paths in Dir.
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	// Pool holds the CA.
	Pool *x509.CertPool
	// Server is the server's key pair.
	Server tls.Certificate
}

// NewCerts generates a CA, a server and a client certificate (ECDSA P-256,
// valid for an hour) into a temporary directory.
func NewCerts(tb testing.TB) *Certs {
	tb.Helper()
	c := &Certs{Dir: tb.TempDir()}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(c.Dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			tb.Fatalf("testenv: write %s: %v", p, err)
		}
		return p
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			tb.Fatalf("testenv: key: %v", err)
		}
		return k
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kjob test CA"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatalf("testenv: CA: %v", err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	c.CA = write("ca.pem", "CERTIFICATE", caDER)
	c.Pool = x509.NewCertPool()
	c.Pool.AddCert(caCert)

	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, certFile, keyFile string) (string, string, tls.Certificate) {
		k := key()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			tb.Fatalf("testenv: %s certificate: %v", cn, err)
		}
		kder, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			tb.Fatalf("testenv: %s key: %v", cn, err)
		}
		return write(certFile, "CERTIFICATE", der), write(keyFile, "EC PRIVATE KEY", kder),
			tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
	}
	c.ServerCert, c.ServerKey, c.Server = leaf(2, "localhost", x509.ExtKeyUsageServerAuth, "server.pem", "server-key.pem")
	c.ClientCert, c.ClientKey, _ = leaf(3, "kjob-client", x509.ExtKeyUsageClientAuth, "client.pem", "client-key.pem")
	return c
}

// ServerTLS returns a server tls.Config that requires and verifies client
// certificates (mutual TLS).
func (c *Certs) ServerTLS() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{c.Server}, ClientCAs: c.Pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}
}
