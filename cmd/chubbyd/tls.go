package main

import (
	"encoding/base64"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/chubby-dev/chubby/internal/commalist"
	"github.com/chubby-dev/chubby/internal/devca"
)

// The built-in CA (package devca):
//
//	chubbyd tls ca create [-dir DIR] [-cell NAME] [-days N]
//	chubbyd tls cert create -name NAME [-server] [-ip IPS] [-dns NAMES] [-dir DIR] [-days N]
//	chubbyd keygen
//
// Each prints the files it wrote; exit 1 on failure (nothing overwritten),
// 2 on a bad command line.

func runTLS(args []string) int {
	if len(args) >= 2 && args[0] == "ca" && args[1] == "create" {
		return runCACreate(args[2:])
	}
	if len(args) >= 2 && args[0] == "cert" && args[1] == "create" {
		return runCertCreate(args[2:])
	}
	fmt.Fprintln(os.Stderr, "usage: chubbyd tls ca create [-dir DIR] [-cell NAME] [-days N]\n       chubbyd tls cert create -name NAME [-server] [-ip IPS] [-dns NAMES] [-dir DIR] [-days N]")
	return 2
}

func runCACreate(args []string) int {
	fl := flag.NewFlagSet("chubbyd tls ca create", flag.ContinueOnError)
	dir := fl.String("dir", ".", "directory for ca.pem and ca-key.pem")
	cell := fl.String("cell", "local", "the cell the CA is for (its servers' certificates name server.CELL.chubby)")
	days := fl.Int("days", 1825, "validity in days")
	if code, ok := parse(fl, args); !ok {
		return code
	}
	if err := devca.CreateCA(*dir, *cell, *days); err != nil {
		fmt.Fprintf(os.Stderr, "chubbyd: tls ca create: %v\n", err)
		return 1
	}
	fmt.Printf("wrote %s/%s and %s/%s (keep the key private)\n", *dir, devca.CAFile, *dir, devca.CAKeyFile)
	return 0
}

func runCertCreate(args []string) int {
	fl := flag.NewFlagSet("chubbyd tls cert create", flag.ContinueOnError)
	dir := fl.String("dir", ".", "directory of the CA; the certificate is written there")
	name := fl.String("name", "", "common name: the principal (a server's node id)")
	server := fl.Bool("server", false, "a server certificate (server.CELL.chubby, localhost, 127.0.0.1 and -ip/-dns)")
	ips := fl.String("ip", "", "comma-separated IP addresses the certificate names")
	dns := fl.String("dns", "", "comma-separated DNS names the certificate names")
	days := fl.Int("days", 365, "validity in days")
	if code, ok := parse(fl, args); !ok {
		return code
	}
	if *name == "" {
		fmt.Fprintln(os.Stderr, "chubbyd: tls cert create: -name is required")
		return 2
	}
	r := devca.CertRequest{Name: *name, Server: *server, Days: *days, DNS: split(*dns)}
	for _, s := range split(*ips) {
		ip := net.ParseIP(s)
		if ip == nil {
			fmt.Fprintf(os.Stderr, "chubbyd: tls cert create: -ip %q is not an IP address\n", s)
			return 2
		}
		r.IPs = append(r.IPs, ip)
	}
	cert, key, err := devca.CreateCert(*dir, r)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chubbyd: tls cert create: %v\n", err)
		return 1
	}
	fmt.Printf("wrote %s and %s\n", cert, key)
	return 0
}

func runKeygen(args []string) int {
	if len(args) > 0 {
		fmt.Fprintln(os.Stderr, "usage: chubbyd keygen")
		return 2
	}
	k, err := devca.Keygen()
	if err != nil {
		fmt.Fprintf(os.Stderr, "chubbyd: keygen: %v\n", err)
		return 1
	}
	fmt.Println(k)
	return 0
}

// readGossipKey reads a key file written from `chubbyd keygen`'s output:
// base64 of 16, 24 or 32 bytes.
func readGossipKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s: not a base64 key (chubbyd keygen): %v", path, err)
	}
	return k, nil
}

// parse parses a subcommand's flags: ok false with the exit code on -h or
// a bad command line.
func parse(fl *flag.FlagSet, args []string) (int, bool) {
	if err := fl.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0, false
		}
		return 2, false
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "chubbyd: unexpected arguments %q\n", fl.Args())
		return 2, false
	}
	return 0, true
}

func split(s string) []string { return commalist.Split(s) }
