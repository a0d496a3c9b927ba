package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/redlock-proxy/redlock-proxy/conf"
)

// loadTLS builds the listener's and the backends' TLS from cfg; each is
// nil when its block is absent.
func loadTLS(cfg conf.Config) (client, backend *tls.Config, err error) {
	if client, err = serverTLS(cfg.TLS); err != nil {
		return nil, nil, err
	}
	if backend, err = backendTLS(cfg.BackendTLS); err != nil {
		return nil, nil, err
	}
	return client, backend, nil
}

// serverTLS builds the listener's TLS from the tls block: nil when there is
// none. With client_ca_file every client must present a certificate that
// CA signed. The running proxy reads the files again on SIGHUP
// (certReloader).
func serverTLS(t *conf.TLS) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	cert, err := loadKeyPair("tls", t.CertFile, t.KeyFile)
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
	}
	if t.ClientCAFile != "" {
		pool, err := loadPool("tls.client_ca_file", t.ClientCAFile)
		if err != nil {
			return nil, err
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// backendTLS builds the TLS of rediss:// backends from the backend_tls
// block: nil when there is none (then the system roots verify them).
func backendTLS(t *conf.BackendTLS) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify,
	}
	if t.CAFile != "" {
		pool, err := loadPool("backend_tls.ca_file", t.CAFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := loadKeyPair("backend_tls", t.CertFile, t.KeyFile)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// loadKeyPair reads a PEM certificate chain and its key; errors name the
// block and the files.
func loadKeyPair(block, certFile, keyFile string) (tls.Certificate, error) {
	for _, f := range []struct{ key, path string }{{"cert_file", certFile}, {"key_file", keyFile}} {
		if _, err := os.Stat(f.path); err != nil {
			return tls.Certificate{}, fmt.Errorf("%s.%s: %w", block, f.key, err)
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: cert_file %s, key_file %s: %w", block, certFile, keyFile, err)
	}
	return cert, nil
}

// loadPool reads PEM CA certificates into a pool.
func loadPool(key, file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: %s holds no PEM certificate", key, file)
	}
	return pool, nil
}

// certReloader serves the listener's TLS from the tls block's files as
// last read. Each handshake takes the config current when it starts, so
// reading the files again (SIGHUP: certificate rotation, a new client CA)
// changes nothing for connections already up.
type certReloader struct {
	cur atomic.Pointer[tls.Config]
}

func newCertReloader(tc *tls.Config) *certReloader {
	c := &certReloader{}
	c.cur.Store(tc)
	return c
}

// config is the listener's TLS: it hands each handshake the current one.
func (c *certReloader) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return c.cur.Load(), nil
		},
	}
}

// reload reads t's files again and serves them from the next handshake
// on. On an error the running config stays. It returns the new leaf
// certificate, for the log.
func (c *certReloader) reload(t *conf.TLS) (*x509.Certificate, error) {
	tc, err := serverTLS(t)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(tc.Certificates[0].Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("tls.cert_file: %w", err)
	}
	c.cur.Store(tc)
	return leaf, nil
}
