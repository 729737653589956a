//go:build !franz_1_21

package main

import "github.com/twmb/franz-go/pkg/kgo"

// serverSideBalancer is KIP-848's consumer protocol (franz-go 1.22 and later).
func serverSideBalancer() (kgo.Opt, bool) { return kgo.ServerSideBalancer(), true }
