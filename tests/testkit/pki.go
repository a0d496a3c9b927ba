package testkit

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

// PKI is a test CA with a server certificate for 127.0.0.1 and localhost
// and a client certificate, all ECDSA P-256, valid from an hour ago for a
// day.
type PKI struct {
	Pool   *x509.CertPool // trusts the CA
	Server tls.Certificate
	Client tls.Certificate

	caDER []byte
}

// NewPKI makes a new CA and its two certificates.
func NewPKI(tb testing.TB) *PKI {
	tb.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		return k
	}
	notBefore, notAfter := time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redlock-proxy test ca"},
		NotBefore: notBefore, NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		tb.Fatal(err)
	}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) tls.Certificate {
		key := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: notBefore, NotAfter: notAfter,
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			tb.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	p := &PKI{Pool: x509.NewCertPool(), caDER: caDER}
	p.Pool.AddCert(ca)
	p.Server = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	p.Client = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

// ServerConfig is a listener's TLS with the server certificate; with
// clientCerts, clients must present a certificate the CA signed.
func (p *PKI) ServerConfig(clientCerts bool) *tls.Config {
	tc := &tls.Config{Certificates: []tls.Certificate{p.Server}, MinVersion: tls.VersionTLS12}
	if clientCerts {
		tc.ClientCAs = p.Pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc
}

// ClientConfig trusts the CA; withCert presents the client certificate.
func (p *PKI) ClientConfig(withCert bool) *tls.Config {
	tc := &tls.Config{RootCAs: p.Pool, MinVersion: tls.VersionTLS12}
	if withCert {
		tc.Certificates = []tls.Certificate{p.Client}
	}
	return tc
}

// PKIFiles are the paths of a PKI written as PEM files.
type PKIFiles struct {
	CA                    string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// WriteFiles writes the CA certificate and both key pairs as PEM files
// (keys in PKCS #8) to a new temporary directory of the test.
func (p *PKI) WriteFiles(tb testing.TB) PKIFiles {
	tb.Helper()
	dir := tb.TempDir()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			tb.Fatal(err)
		}
		return path
	}
	key := func(c tls.Certificate) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
		if err != nil {
			tb.Fatal(err)
		}
		return der
	}
	return PKIFiles{
		CA:         write("ca.pem", "CERTIFICATE", p.caDER),
		ServerCert: write("server.pem", "CERTIFICATE", p.Server.Certificate[0]),
		ServerKey:  write("server-key.pem", "PRIVATE KEY", key(p.Server)),
		ClientCert: write("client.pem", "CERTIFICATE", p.Client.Certificate[0]),
		ClientKey:  write("client-key.pem", "PRIVATE KEY", key(p.Client)),
	}
}
